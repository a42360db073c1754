"""chess-sim: SO-101 chess manipulation in MuJoCo, from scripted expert to RL fine-tuned flow policies."""
