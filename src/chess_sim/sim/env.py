"""ChessEnv: the SO-101 moving one chess piece, as a Gymnasium environment, with chunked stepping."""

from __future__ import annotations

import copy
import time

import gymnasium as gym
import mujoco
import numpy as np

from chess_sim.config import CAMERAS, TRAIN_SEED, EnvConfig, RewardConfig, profile
from chess_sim.sim.expert import rest_pose
from chess_sim.sim.frustum import culled
from chess_sim.sim.images import resize_image
from chess_sim.sim.judge import Judge
from chess_sim.sim.scene import TABLE_TOP, Scene, build_scene, place_task
from chess_sim.sim.sim_state import ContactReader, Units, snapshot
from chess_sim.sim.tasks import Task, sample_task


class ChessEnv(gym.Env):
    """
    ## Description
    An SO-101 arm (LeRobot's follower, simulated in MuJoCo) beside a chessboard; a scene is a chess position
    reached by random legal plies and one legal move to perform, given in words (`info["instruction"]`, e.g.
    "Move the white knight from g1 to f3."): a quiet pawn or knight move by default, or as the task profile
    (`SceneConfig.tasks`) says, a quiet move of any piece or a capture. Scenes are a pure function of
    `(seed, index)`.

    ## Action space
    `Box((6,), float32)`: absolute joint targets at 30 Hz, `shoulder_pan, shoulder_lift, elbow_flex, wrist_flex,
    wrist_roll` in degrees and `gripper` in 0 (closed) to 100 (open). Targets outside the joint limits are
    clipped to them; a wrong shape or a non-finite value raises `ValueError`.

    ## Observation space
    `{"pixels": {"front": (S, S, 3) uint8, "wrist": (S, S, 3) uint8}, "agent_pos": (6,) float32}`: the two
    cameras and the measured joint positions in the action's units. The cameras render `CameraConfig.height x
    width` frames (datasets and videos keep those); S x S is `CameraConfig.observation_size`, the frame resized
    (antialiased), or the frame itself when that is None. Without rendering (`EnvConfig.render` False) only
    `agent_pos`. Every array is a fresh copy.

    ## Rewards
    `RewardConfig`: `success` once on success; `lift` once when the target is first cleanly lifted;
    `toppled` / `disturbed` once when that failure first happens. The terms are in `info["reward_terms"]`.

    ## Starting state
    Arm at its rest pose, gripper open, pieces placed with small offsets and settled for 0.1 s (a game's later
    moves start where the last one left everything: see Reset).

    ## Episode end
    `terminated` on success, `unstable`, an action that is NaN or inf (`policy_error`, nothing simulated), and
    (with `EnvConfig.early_stop`) on an irreversible failure;
    `truncated` at `EnvConfig.episode_seconds` (a time limit, not a terminal state: value bootstrapping
    belongs to the learner; `_max_episode_steps` steps). `info["end"]` names the end (`judge.ENDS`),
    `info["is_success"]` says whether it is a success (False on reset and while running, as LeRobot reads it),
    and `info["measurements"]` holds `clean_lift, close_lateral_mm, place_error_mm, max_tilt_deg`.

    ## Reset
    `reset(seed=S, options={"index": I})`. A new `seed` without an index starts at index 0; no seed continues with
    the next index. `info` holds the task and `torch_seed`; `task_description` is the instruction. The scripted
    expert drives an env from beside it (`sim.expert.ExpertDriver`). A game (`chess_sim.play`) gives the task
    instead (`options={"task": Task}`), and for its later moves the slot holding each of the task's pieces
    (`"assignment"`): the pieces and the arm then stay where the last move left them. Other keys, and values of
    the wrong type or range, are a ValueError; a step before the first reset or after an episode's end raises
    Gymnasium's `ResetNeeded`.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}

    def __init__(self, cfg: EnvConfig | None = None, reward: RewardConfig | None = None,
                 render_mode: str | None = None, seed: int = TRAIN_SEED):
        self.cfg = cfg or profile("baseline")
        self.reward_cfg = reward or RewardConfig()
        self.render_mode = render_mode
        self.scene: Scene = build_scene(self.cfg)
        self.model = self.scene.model
        self.data = mujoco.MjData(self.model)
        self.units = Units(self.scene)
        self.contacts = ContactReader(self.scene)
        self.rest_rad = rest_pose(self.scene)
        """(6,) the arm's rest pose in radians, where every episode starts."""
        self.substeps = self.cfg.physics.substeps
        self.max_steps = self.cfg.max_steps
        self._max_episode_steps = self.max_steps  # the name LeRobot and Gymnasium's wrappers read
        self.action_space = gym.spaces.Box(self.units.lower.astype(np.float32), self.units.upper.astype(np.float32),
                                           dtype=np.float32)
        spaces = {"agent_pos": gym.spaces.Box(self.units.lower.astype(np.float32),
                                              self.units.upper.astype(np.float32), dtype=np.float32)}
        camera = self.cfg.camera
        size = (camera.height, camera.width, 3)
        if camera.observation_size is not None:
            size = (camera.observation_size, camera.observation_size, 3)
        if self.cfg.render:
            spaces["pixels"] = gym.spaces.Dict({name: gym.spaces.Box(0, 255, size, dtype=np.uint8)
                                                for name in CAMERAS})
        self.observation_space = gym.spaces.Dict(spaces)
        self._renderers: dict[tuple[int, int], mujoco.Renderer] = {}
        self.render_seconds = 0.0
        """CPU seconds of this process spent rendering (and resizing observations) since construction: time
        splits stay true when processes share cores."""
        self._scene_seed = seed
        self._index = -1
        self.task: Task | None = None
        self._ended = True
        """Whether a step must wait for a reset: before the first one, and once an episode ends."""

    # ------------------------------------------------------------------ gymnasium API
    RESET_OPTIONS = ("index", "task", "assignment")
    """The keys `reset(options=...)` reads."""

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        options = self._checked_options(seed, options)
        super().reset(seed=seed)
        if seed is not None:
            self._scene_seed = int(seed)
        if "index" in options:
            self._index = int(options["index"])
        else:
            self._index = 0 if seed is not None else self._index + 1
        self.task = options.get("task") or sample_task(self._scene_seed, self._index, self.cfg.scene)
        if "assignment" in options:  # a game goes on: the pieces and the arm stay where the last move left them
            self.assignment = tuple(options["assignment"])
        else:
            self.assignment = place_task(self.scene, self.data, self.task, self.rest_rad)
        self.leg_slots = tuple(self.assignment[leg.piece] for leg in self.task.legs)
        """The slot of each leg's piece (a capture: the captured piece's, then the mover's)."""
        self.start_positions = self.data.xpos[self.contacts.bodies].copy()
        self.judge = Judge(self.cfg.judge, self.cfg.scene.board, early_stop=self.cfg.early_stop,
                           control_hz=self.cfg.physics.control_hz)
        self._enter_leg(0)
        self.steps = 0
        self._rewarded: set[str] = set()
        self._info = self._task_info()
        self._ended = False
        return self._observation(), dict(self._info)

    def _checked_options(self, seed, options) -> dict:
        """`reset`'s options, checked: a dict of known keys, a whole non-negative index, a `Task`, an assignment of
        one whole slot per piece of the task; ValueError (one line) otherwise."""
        if seed is not None and not _whole(seed):
            raise ValueError(f"reset: seed must be a whole number >= 0, got {seed!r}")
        if options is None:
            return {}
        if not isinstance(options, dict):
            raise ValueError(f"reset: options must be a dict, got {type(options).__name__}")
        unknown = sorted(set(map(str, options)) - set(self.RESET_OPTIONS))
        if unknown:
            raise ValueError(f"reset: unknown option {', '.join(unknown)}; known: {', '.join(self.RESET_OPTIONS)}")
        index = options.get("index")
        if index is not None and not _whole(index):
            raise ValueError(f"reset: options['index'] must be a whole number >= 0, got {index!r}")
        task = options.get("task")
        if task is not None and not isinstance(task, Task):
            raise ValueError(f"reset: options['task'] must be a chess_sim Task, got {type(task).__name__}")
        if "assignment" in options:
            assignment = options["assignment"]
            whole = isinstance(assignment, (list, tuple)) and all(_whole(slot) for slot in assignment)
            if task is None or not whole or len(assignment) != len(task.pieces):
                raise ValueError("reset: options['assignment'] needs options['task'] and one whole slot >= 0 per "
                                 "piece of the task")
        return options

    def step(self, action):
        reward, terminated, truncated, info = self.advance(action)
        return self._observation(), reward, terminated, truncated, info

    def step_chunk(self, actions, film: bool = False):
        """Execute a chunk of joint targets `(T, 6)`; stops early inside the chunk when the episode ends.

        Returns `(observation after the chunk, summed reward, terminated, truncated, info)`; `info["executed"]`
        is the number of actions run. Only the final observation is rendered, unless `film` asks for the
        camera images after every step in `info["frames"]` (a list of `camera_images()` dicts)."""
        actions = np.asarray(actions, dtype=np.float64)
        if actions.ndim != 2 or actions.shape[1] != 6 or actions.shape[0] == 0:
            raise ValueError(f"action chunk must have shape (T, 6) with T >= 1, got {actions.shape}")
        if not np.all(np.isfinite(actions)):
            info = self._end_by_policy_error()[3]
            info["executed"] = 0
            if film:
                info["frames"] = []
            return self._observation(), 0.0, True, False, info
        return self._run_chunk(iter(self._to_ctrl(actions)), film)  # validated and converted once

    def step_each(self, next_action, steps: int, film: bool = False):
        """Up to `steps` control steps, each action (6,) asked of `next_action()` after the previous step (a
        closed-loop controller such as the scripted expert); returns what `step_chunk` returns."""
        return self._run_chunk((self._to_ctrl(self._validate(next_action())) for _ in range(steps)), film)

    def _run_chunk(self, controls, film: bool):
        total, executed, frames = 0.0, 0, []
        for ctrl in controls:
            reward, terminated, truncated, info = self._advance_ctrl(ctrl)
            total += reward
            executed += 1
            if film:
                frames.append(self.camera_images())
            if terminated or truncated:
                break
        info["executed"] = executed
        if film:
            info["frames"] = frames
        return self._observation(), total, terminated, truncated, info

    def advance(self, action) -> tuple[float, bool, bool, dict]:
        """One control step without an observation: `(reward, terminated, truncated, info)`; Gymnasium's
        `ResetNeeded` before the first reset and after the episode ended."""
        action = self._shaped(action)
        if not np.all(np.isfinite(action)):
            return self._end_by_policy_error()
        return self._advance_ctrl(self._to_ctrl(action))

    def _end_by_policy_error(self) -> tuple[float, bool, bool, dict]:
        """The episode ends, judged `policy_error`, on an action that is NaN or inf: nothing is simulated."""
        self._require_running()
        self._ended = True
        return 0.0, True, False, self._step_info("policy_error", {})

    def _require_running(self) -> None:
        if self._ended:
            raise gym.error.ResetNeeded("the episode has ended (or not begun): call reset() before stepping")

    def _step_info(self, end: str | None, terms: dict[str, float]) -> dict:
        """A step's `info`: the task's, the end (None while running), the reward terms and the judge's measurements."""
        info = dict(self._info)
        info.update(end=end, is_success=end == "success", reward_terms=terms, measurements=self.judge.measurements(),
                    steps=self.steps, legs_done=len(self.task.legs) if end == "success" else self.leg)
        return info

    def _to_ctrl(self, actions: np.ndarray) -> np.ndarray:
        """Joint targets (..., 6) in LeRobot units -> actuator controls in radians, clipped to the limits."""
        return self.units.to_rad(np.clip(actions, self.units.lower, self.units.upper))

    def _advance_ctrl(self, ctrl: np.ndarray) -> tuple[float, bool, bool, dict]:
        self._require_running()
        self.data.ctrl[:] = ctrl
        for _ in range(self.substeps):
            mujoco.mj_step(self.model, self.data)
        self.steps += 1
        legs = self.task.legs
        leg = legs[self.leg]
        end = self.judge.update(snapshot(
            self.scene, self.data, self.contacts, self.start_positions, self.target_slot, self.goal_xy,
            self.cfg.judge.place_tolerance_mm, goal_area=leg.area, goal_top=None if leg.area is None else TABLE_TOP,
            finished=self.leg_slots[:self.leg], last_leg=self.leg == len(legs) - 1))
        if self.judge.leg_done:
            self.judge.next_leg()
            self._enter_leg(self.leg + 1)
        truncated = False
        if end is None and self.steps >= self.max_steps:
            end = self.judge.timeout_end()
            truncated = True
        terminated = end is not None and not truncated
        self._ended = terminated or truncated
        reward, terms = self._reward(end)
        if end == "unstable":  # keep observations finite; the state is meaningless now
            mujoco.mj_resetData(self.model, self.data)
        return reward, terminated, truncated, self._step_info(end, terms)

    def render(self):
        return self.render_camera("front")

    def close(self):
        for renderer in self._renderers.values():
            renderer.close()
        self._renderers.clear()

    def rest_action(self) -> np.ndarray:
        """(6,) float32 joint targets that hold the rest pose, in LeRobot units."""
        return self.units.to_units(self.rest_rad).astype(np.float32)

    def time_physics(self, actions, advance: bool = False) -> float:
        """Seconds that the bare physics (`mj_step` only: no judge, reward or observation) of a chunk (T, 6) takes
        from the current state, run on a scratch copy (the episode is left as it was), or with `advance` on the
        episode's own state, which the chunk then moves on (its judge, step count and rewards stay behind: this
        replays an episode's chunks through the states it went through, for benchmarks)."""
        controls = self._to_ctrl(np.asarray(actions, dtype=np.float64))
        data = self.data if advance else copy.copy(self.data)
        started = time.perf_counter()
        for ctrl in controls:
            data.ctrl[:] = ctrl
            for _ in range(self.substeps):
                mujoco.mj_step(self.model, data)
        return time.perf_counter() - started

    def save_state(self):
        """Everything a step changes, to try something from here and come back (`restore_state`)."""
        return copy.copy(self.data), copy.deepcopy(self.judge), self.steps, set(self._rewarded), self.leg, self._ended

    def restore_state(self, saved) -> None:
        self.data, self.judge, self.steps, self._rewarded, leg, self._ended = saved
        self._enter_leg(leg)

    def _enter_leg(self, leg: int) -> None:
        """Judge the task's leg `leg` from now on: its piece is the target, its goal the goal."""
        self.leg = leg
        self.target_slot = self.leg_slots[leg]
        self.goal_xy = np.asarray(self.task.legs[leg].goal_xy, dtype=np.float64)

    # ------------------------------------------------------------------ internals
    @staticmethod
    def _shaped(action) -> np.ndarray:
        action = np.asarray(action, dtype=np.float64)
        if action.shape != (6,):
            raise ValueError(f"action must have shape (6,), got {action.shape}")
        return action

    def _validate(self, action) -> np.ndarray:
        """A closed-loop controller's action (the scripted expert's): NaN or inf there is a bug, not a judged end."""
        action = self._shaped(action)
        if not np.all(np.isfinite(action)):
            raise ValueError(f"action contains {'NaN' if np.any(np.isnan(action)) else 'inf'}")
        return action

    def _reward(self, end: str | None) -> tuple[float, dict[str, float]]:
        cfg = self.reward_cfg
        terms = {}
        events = {"success": end == "success", "lift": self.judge.clean_lift,
                  "toppled": self.judge.failure == "toppled", "disturbed": self.judge.failure == "disturbed"}
        for name, happened in events.items():
            if happened and name not in self._rewarded:
                self._rewarded.add(name)
                terms[name] = getattr(cfg, name)
        return float(sum(terms.values())), terms

    def _task_info(self) -> dict:
        task = self.task
        return {
            "instruction": task.instruction, "piece": task.piece, "color": task.color,
            "from": task.from_square, "to": task.to_square, "move": task.move_uci, "fen": task.fen,
            "seed": task.seed, "index": task.index, "torch_seed": task.torch_seed, "is_success": False,
            "captured": task.captured, "legs_done": 0,
        }

    @property
    def task_description(self) -> str:
        """The current scene's instruction in words ("" before the first reset): what LeRobot's policies read."""
        return "" if self.task is None else self.task.instruction

    def state(self) -> np.ndarray:
        """Measured joint positions, `(6,)` float32 in degrees / gripper 0-100 (a fresh array)."""
        q = self.data.qpos[self.scene.arm_qpos]
        if not np.all(np.isfinite(q)):
            q = np.zeros(6)
        return self.units.to_units(q).astype(np.float32)

    def tcp_position(self) -> np.ndarray:
        """World position of the gripper's tool point between the jaw pads, `(3,)` metres."""
        return self.data.site_xpos[self.scene.tcp_site].copy()

    def _state_obs(self) -> dict:
        return {"agent_pos": self.state()}

    def _observation(self) -> dict:
        observation = self._state_obs()
        if self.cfg.render:
            observation["pixels"] = self.observation_images()
        return observation

    def observation_images(self) -> dict[str, np.ndarray]:
        """The cameras as the observation holds them: at `CameraConfig.observation_size`, rendered at the frame
        size and resized."""
        camera = self.cfg.camera
        if camera.observation_size is None:
            return self.camera_images()
        size = camera.observation_size
        frames = self.camera_images()
        started = time.process_time()
        resized = {name: resize_image(frame, size, size) for name, frame in frames.items()}
        self.render_seconds += time.process_time() - started
        return resized

    def camera_images(self) -> dict[str, np.ndarray]:
        """Fresh `(H, W, 3)` uint8 frames of the `front` and `wrist` cameras at the configured frame size."""
        return {name: self.render_camera(name) for name in CAMERAS}

    def render_camera(self, camera: str, size: tuple[int, int] | None = None) -> np.ndarray:
        """A fresh image of a named camera (`front`, `wrist` or `overview`), `size` (height, width) or the frame
        size."""
        size = size or (self.cfg.camera.height, self.cfg.camera.width)
        if size not in self._renderers:
            self._renderers[size] = mujoco.Renderer(self.model, *size)
        renderer = self._renderers[size]
        started = time.process_time()
        camera_id = self.scene.cameras[camera]
        with culled(self.model, self.data, camera_id, aspect=size[1] / size[0]):
            renderer.update_scene(self.data, camera=camera_id)
        image = renderer.render()  # a new array on every call
        self.render_seconds += time.process_time() - started
        return image


def _whole(value) -> bool:
    """A whole number >= 0 (a bool is not one)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 0
