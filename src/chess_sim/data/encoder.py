"""The camera streams' video encoder (LeRobot's `RGBEncoderConfig`), checked before a recording starts: LeRobot
itself only finds a codec or preset the installed FFmpeg refuses once the first episode is encoded, after it was
simulated."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from fractions import Fraction

import numpy as np

from chess_sim.errors import first_line

TRIAL_SIZE = 64
"""Side of the two blank frames a trial encoding sends."""


class EncoderError(ValueError):
    """A codec or preset the installed encoder cannot use (one-line message for the CLI)."""


def checked_encoder(vcodec: str, preset: str):
    """LeRobot's encoder config for `vcodec` and `preset`, once two frames have been encoded with it; EncoderError
    (one line naming both) when LeRobot or the installed FFmpeg refuses them."""
    import av
    from lerobot.configs.video import RGBEncoderConfig

    try:
        encoder = RGBEncoderConfig(vcodec=vcodec, preset=preset)
        encoder.resolve_vcodec()
        encoder.validate()
        context = av.CodecContext.create(encoder.vcodec, "w")
        context.width = context.height = TRIAL_SIZE
        context.pix_fmt, context.time_base = encoder.pix_fmt, Fraction(1, 30)
        context.options = encoder.get_codec_options(as_strings=True)
        level = av.logging.get_level()
        av.logging.set_level(av.logging.ERROR)  # FFmpeg's log then goes through PyAV: its last error joins ours
        try:
            with av.logging.Capture(), _stderr_silenced():  # x264 complains on the stderr itself: a second line
                context.open()
        finally:
            av.logging.set_level(level)
        for pts in range(2):
            frame = av.VideoFrame.from_ndarray(np.zeros((TRIAL_SIZE, TRIAL_SIZE, 3), np.uint8), format="rgb24")
            frame = frame.reformat(format=encoder.pix_fmt)
            frame.pts = pts
            context.encode(frame)
        context.encode(None)
    except Exception as error:  # noqa: BLE001 - LeRobot and PyAV each refuse in their own kinds
        raise EncoderError(f"--vcodec {vcodec} --vpreset {preset}: the installed encoder refuses them "
                           f"({first_line(error)})") from None
    return encoder


@contextmanager
def _stderr_silenced():
    """File descriptor 2 points at /dev/null inside (a C library's own prints go there too)."""
    sys.stderr.flush()
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)
