"""Summary statistics against hand calculations."""

import pytest

from chess_sim.report.summary import summarize, wilson


def test_wilson_hand_values():
    # p = 0.5, n = 10, z = 1.96: centre 0.5, half-width 1.96*sqrt(0.025 + 0.0096)/1.384 = 0.2366
    low, high = wilson(5, 10)
    assert low == pytest.approx(0.2366, abs=1e-3) and high == pytest.approx(0.7634, abs=1e-3)
    assert wilson(0, 10)[0] == 0.0 and wilson(0, 10)[1] == pytest.approx(0.2775, abs=1e-3)
    assert wilson(0, 0) == (0.0, 1.0)


def test_summarize_keys_and_rates():
    rows = [
        {"end": "success", "piece": "pawn", "return": 1.1, "clean_lift": True, "close_lateral_mm": 0.2,
         "place_error_mm": 1.0},
        {"end": "toppled", "piece": "knight", "return": -0.2, "clean_lift": False, "close_lateral_mm": None,
         "place_error_mm": 30.0},
        {"end": "success", "piece": "knight", "return": 1.1, "clean_lift": True, "close_lateral_mm": 0.4,
         "place_error_mm": 2.0},
    ]
    s = summarize(rows)
    assert s["episodes"] == 3
    assert s["success"] == pytest.approx(2 / 3)
    assert s["success_pawn"] == 1.0 and s["success_knight"] == 0.5
    assert s["toppled"] == pytest.approx(1 / 3) and s["disturbed"] == 0.0
    assert s["close_mm_median"] == pytest.approx(0.3)
    assert s["place_error_mm_median"] == pytest.approx(1.5)
    assert s["return"] == pytest.approx(2.0 / 3)
    assert s["ends"]["toppled"] == 1
