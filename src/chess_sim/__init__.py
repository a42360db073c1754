"""chess-sim: SO-101 chess manipulation in MuJoCo, from scripted expert to RL fine-tuned flow policies.

Importing the package registers the environment with Gymnasium (`gymnasium.make("ChessSim-v0")`, or
`gymnasium.make("chess_sim:ChessSim-v0")` without importing it first); the simulator itself loads on first use.
"""

import gymnasium

if "ChessSim-v0" not in gymnasium.registry:
    gymnasium.register(id="ChessSim-v0", entry_point="chess_sim.sim.env:ChessEnv")
