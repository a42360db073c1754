#!/usr/bin/env bash
# Sets up a fresh Debian machine: headless-rendering and FFmpeg libraries, then `.venv` with the project.
# Safe to run again: every step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."

debs=(libegl1 libegl-mesa0 libgl1-mesa-dri libosmesa6 libgl1
      libavcodec59 libavformat59 libavutil57 libswscale6 libavdevice59 libavfilter8
      chromium)
missing=()
for p in "${debs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
    sudo_cmd=(); [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi

python_bin=""
for cand in "$HOME/.pyenv/versions/3.12.1/bin/python3" "$(command -v python3.12 || true)"; do
    if [ -n "$cand" ] && [ -x "$cand" ]; then python_bin="$cand"; break; fi
done
[ -n "$python_bin" ] || { echo "setup: Python 3.12 not found (pyenv 3.12.1 or python3.12)" >&2; exit 2; }

[ -x .venv/bin/python ] || "$python_bin" -m venv .venv
stamp=.venv/.chess-sim-installed
plugin=plugins/lerobot_env_chess_sim  # LeRobot finds it by its distribution name: `lerobot-eval --env.type=chess_sim`
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ "$plugin/pyproject.toml" -nt "$stamp" ]; then
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -e '.[dev,ray]' -e "$plugin"
    touch "$stamp"
fi
echo "setup: ready (.venv)"
