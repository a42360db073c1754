"""The simulator: SO-101 + chessboard in MuJoCo. Imports nothing from policy/ or rl/, and never torch."""

import gymnasium

gymnasium.register(id="ChessSim-v0", entry_point="chess_sim.sim.env:ChessEnv")
