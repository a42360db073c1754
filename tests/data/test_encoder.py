"""The video encoder is tried before a recording: what the installed FFmpeg refuses is one line naming both choices."""

import pytest

from chess_sim.data.encoder import EncoderError, checked_encoder


def test_the_default_encoder_is_accepted_as_lerobot_configures_it():
    encoder = checked_encoder("h264", "ultrafast")
    assert (encoder.vcodec, encoder.preset) == ("h264", "ultrafast")


@pytest.mark.parametrize("vcodec, preset, words", [("bogus", "ultrafast", "Invalid vcodec 'bogus'"),
                                                   ("h264", "bogus", "preset/tune bogus"),
                                                   ("libsvtav1", "fast", "expects a number")])
def test_a_codec_or_preset_the_encoder_refuses_is_one_line(vcodec, preset, words, capfd):
    with pytest.raises(EncoderError) as raised:
        checked_encoder(vcodec, preset)
    message = str(raised.value)
    assert message.startswith(f"--vcodec {vcodec} --vpreset {preset}: ") and words in message
    assert "\n" not in message and capfd.readouterr().err == ""  # x264's own complaint is held back
