"""The simulator: SO-101 + chessboard in MuJoCo. Imports nothing from policy/ or rl/, and never torch. (The Gymnasium
id `ChessSim-v0` is registered by the package, `chess_sim/__init__.py`.)"""
