"""The RL algorithms, one module each, by the name `RLConfig.algorithm.name` gives (`rl/algorithms/base.py` says
what each provides)."""

from chess_sim.rl.algorithms.filtered import SuccessFiltered
from chess_sim.rl.algorithms.reinflow_ppo import ReinFlowPPO

ALGORITHM_CLASSES = {"ppo": ReinFlowPPO, "filtered": SuccessFiltered}
"""Each algorithm's class, by name (`config.ALGORITHMS`)."""
