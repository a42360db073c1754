"""Frozen configuration dataclasses and named profiles.

Every knob has a docstring saying what it is and, for thresholds, why it has its value. Derived values
(substeps, steps per episode) are properties, computed in one place. Nothing here mutates a caller's config:
use `dataclasses.replace` to vary one, or `replace_fields` to vary fields of a config tree by name.

Units: metres, seconds, kilograms, degrees where named `_deg`, millimetres where named `_mm`.

The package is the one home of every default: `base` (shared constants, validation, `replace_fields`), `env` (the
simulator), `learning` (recording, policies, training, evaluation) and `rl` (RL fine-tuning). Everything is
importable from here.
"""

from chess_sim.config.base import (ACTION_DIM, BACKENDS, CAMERAS, CHUNK, DENOISE_STEPS, JOINT_NAMES,  # noqa: F401
                                   ON_FAILURE, POLICY_KINDS, TEST_SEED, TRAIN_SEED, VALIDATION_SEED, replace_fields)
from chess_sim.config.env import (PROFILES, BoardConfig, CameraConfig, EnvConfig, JudgeConfig,  # noqa: F401
                                  PhysicsConfig, RewardConfig, SceneConfig, TASK_PROFILES, profile,
                                  saved_as_today)
from chess_sim.config.learning import (CompactConfig, DaggerConfig, EvalConfig, RecordConfig,  # noqa: F401
                                       TrainConfig)
from chess_sim.config.rl import (ALGORITHM_CONFIGS, ALGORITHMS, CHAIN_DTYPES, RL_PROFILES,  # noqa: F401
                                 START_SPREAD_BOUNDS, Algorithm, FilteredConfig, OptimConfig, PPOConfig, RLConfig,
                                 RLProfile, RunConfig, StartConfig, algorithm_fields)
