"""The scripted expert: closed-loop pick-and-place by inverse kinematics.

`Expert.act(data)` returns the next joint target (LeRobot units, (6,)); `ExpertDriver` drives a `ChessEnv` with
it (the env itself knows nothing of the expert). It plans from what it measures, so it can take over from any
state of an episode: if the target piece is held between both pads it places it; if
it stands on its goal square it retreats; otherwise it picks it up. Taking over in the middle of a descent, a grasp
or a release, it goes on with it rather than starting the phase over, so its DAgger labels stay close to what its
own demonstrations do there (`benchmarks/expert_takeover.py` measures how close). A plan is a list of joint targets
at the control rate, made of straight Cartesian segments solved by `ik.ArmIK` (`trajectory.py`); after each phase
the next is planned from the new state. A capture is two legs (`tasks.Leg`), each such a pick-and-place: the
captured piece goes somewhere in the capture area (`goals.py` chooses where), then the mover to its square.

Grasp geometry: the fixed jaw stays put and the moving jaw pushes the piece against
it, so the tcp aims `GRASP_OFFSET` past the piece axis towards the moving jaw. Pawns are gripped with the jaws
closing along the rank, knights across their body. Far squares need the approach tilted away from the base;
the same tilt is used to pick and to place, so the piece stays upright in the jaws.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import mujoco
import numpy as np

from chess_sim.sim.goals import area_points, middle_of_longest_run, relay_squares
from chess_sim.sim.grasp import closing_for, jaw_room
from chess_sim.sim.ik import ArmIK, Pose, grasp_pose
from chess_sim.sim.judge import in_area
from chess_sim.sim.pieces import PieceShape, piece_shape
from chess_sim.sim.scene import TABLE_TOP, Scene
from chess_sim.sim.sim_state import ContactReader, Units
from chess_sim.sim.tasks import Task
from chess_sim.sim.trajectory import GRIPPER_OPEN_RAD, LINEAR_SPEED, TrajectoryPieces, Unreachable

HOME_TCP = np.array([0.19, 0.0, 0.11])
HOME_TILT_DEG = 30.0
"""Rest pose of the tcp: above the near ranks, tilted so the wrist camera looks across the board."""
GRIPPER_CLOSED_RAD = -0.17
"""Closed command: the force limit, not the position, sets the squeeze."""
GRASP_OFFSET = 0.0024
"""tcp aims this far past the piece axis towards the moving jaw. The fixed pad (7.9 mm from the tcp) then
passes 1 mm from the widest part it sweeps on the way down (the pawn's 4.5 mm head; 0.2 mm clearance
tipped pawns) and stands 1.5 mm from the 4 mm grasp section, which closing pushes against it."""
HOVER = 0.05
"""Height above the grasp / place point where descents start and retreats end."""
CARRY_CLEARANCE = 0.05
"""The carried piece's base travels this high above the board: a knight may jump over a king (44 mm)."""
PLACE_PRESS = 0.0005
"""Lower the piece until its base is 0.5 mm below the surface: contact, then release (releasing 1.5 mm
above made it jump 2-3 mm)."""
RELEASE_SHIFT = 0.0015
"""After opening, the tcp backs this far away from the fixed pad (which still touches the piece) before rising."""
TILTS_DEG = (0.0, 8.0, 16.0, 24.0, 32.0)
"""Approach tilts tried in order; the smallest reachable for both pick and place wins."""
TRAVEL_HEIGHTS = (0.11, 0.10, 0.09, 0.08)
"""tcp heights tried, highest first, for the rise between a capture's two legs (0.11: the rest pose's)."""
RESUME_RADIUS = 0.003
"""Taking over, a tcp this close to a descent's vertical line (and turned as that descent needs) goes on down
from where it is: a fresh plan climbing back to the hover point would teach the policy to undo its approach."""
RESUME_ANGLE_DEG = 10.0
"""... turned within this angle of the descent's closing direction."""


def rest_pose(scene: Scene, ik: ArmIK | None = None) -> np.ndarray:
    """(6,) joint positions in radians of the rest pose (`HOME_TCP`, gripper open), where episodes start and the
    expert returns."""
    ik = ik or ArmIK(scene.model, scene.arm_qpos, scene.arm_dof, scene.tcp_site)
    pose = grasp_pose(HOME_TCP, np.array([0.0, 1.0, 0.0]), np.deg2rad(HOME_TILT_DEG))
    solution = ik.solve(pose, np.zeros(5), np.random.default_rng(0))
    return np.append(solution.q, GRIPPER_OPEN_RAD)


@dataclass(frozen=True)
class Grip:
    tilt: float
    pick_closing: np.ndarray
    place_closing: np.ndarray


class Expert(TrajectoryPieces):
    """Closed-loop scripted controller for one scene at a time (`reset`, then `act` every control step)."""

    def __init__(self, scene: Scene, dt: float, home_rad: np.ndarray | None = None):
        self.scene = scene
        self.dt = dt
        self.units = Units(scene)
        self.ik = ArmIK(scene.model, scene.arm_qpos, scene.arm_dof, scene.tcp_site)
        self.contacts = ContactReader(scene)
        self.rng = np.random.default_rng(0)
        self.home_rad = rest_pose(scene, self.ik) if home_rad is None else home_rad
        self.plan: list[np.ndarray] = []
        self.phase = "idle"
        self.last_target = self.home_rad

    def reset(self, task: Task, slots: tuple[int, ...], data: mujoco.MjData | None = None) -> None:
        """Start on `task`, whose legs move the pieces in `slots` (`ChessEnv.leg_slots`); with `data` it takes over
        from that state, holding the arm where it stands (not at the rest pose) should it find no plan."""
        self.task = task
        self.slots = slots
        # IK restarts draw from this: reseeded per scene so a rollout depends on (seed, index) alone, not on
        # which scenes this process solved before.
        self.rng = np.random.default_rng([task.seed, task.index, 0xE7])
        self.plan = []
        self.phase = "idle"
        self.last_target = self.home_rad if data is None else self._arm_rad(data)
        self.gave_up: str | None = None
        """Why it stopped planning (an unreachable waypoint), None while it has a plan."""
        self._reach: dict[tuple, bool] = {}
        self._enter_leg(0)

    def _enter_leg(self, leg: int) -> None:
        """Work on the task's leg `leg` (a capture's first leg takes the captured piece to the capture area)."""
        spec = self.task.legs[leg]
        placement = self.task.pieces[spec.piece]
        self.leg = leg
        self.target = self.slots[leg]
        self.kind = placement.kind
        self.shape: PieceShape = piece_shape(placement.kind)
        self.area = spec.area
        self.goals = [np.asarray(spec.goal_xy, float)] if spec.area is None else area_points(spec.area)
        """Where the piece may go, the preferred first: its square, or points along the capture area."""
        self.goal = self.goals[0]
        """The one the plan aims at (`_choose_grip` picks it among `goals`)."""
        self.surface = self.scene.board_top if spec.area is None else TABLE_TOP
        """Height of the surface the leg sets its piece on."""
        self.yaw = placement.yaw
        self.grip: Grip | None = None

    # ---------------------------------------------------------------- state
    def _arm_rad(self, data: mujoco.MjData) -> np.ndarray:
        return data.qpos[self.scene.arm_qpos].copy()

    def _piece(self, data: mujoco.MjData) -> np.ndarray:
        """Base-centre position of the target piece."""
        return data.xpos[self.scene.slots[self.target].body].copy()

    def _neighbours(self, data: mujoco.MjData) -> np.ndarray:
        """(M, 2) positions of the other pieces standing on the board (parked ones stand on the table)."""
        bodies = [slot.body for i, slot in enumerate(self.scene.slots) if i != self.target]
        positions = data.xpos[bodies]
        on_board = np.abs(positions[:, 2] - self.scene.board_top) < 0.005
        return positions[on_board, :2]

    def _held(self, data: mujoco.MjData) -> bool:
        pads, _ = self.contacts.jaw_contacts(data, self.target)
        return pads == 2

    def _placed(self, data: mujoco.MjData) -> bool:
        position = self._piece(data)
        if self.area is not None:
            at_goal = in_area(position, self.area)
        else:  # the leg's own square, not a relay square the plan may be heading for
            at_goal = np.linalg.norm(position[:2] - self.goals[0]) < 0.004
        return bool(at_goal and position[2] - self.surface < 0.002)

    # ---------------------------------------------------------------- control
    def act(self, data: mujoco.MjData) -> np.ndarray:
        """Next joint target, (6,) float32 in degrees / gripper 0-100."""
        if not self.plan:
            self._replan(data)
        self.last_target = self.plan.pop(0)
        return self.units.to_units(self.last_target).astype(np.float32)

    def _plan_phase(self, data: mujoco.MjData) -> None:
        q = self._arm_rad(data)
        # a leg before the last whose piece stands released at its goal is done: on to the next (no retreat)
        while self.leg < len(self.slots) - 1 and self._placed(data) and not self._held(data):
            self._enter_leg(self.leg + 1)
        if self.phase == "done":
            self.plan = [self.last_target]
        elif self._held(data):
            self.phase = "place"
            self.plan = self._plan_place(data, q)
        elif self._placed(data):
            self.phase = "done" if self.phase == "retreat" else "retreat"
            self.plan = self._plan_retreat(data, q) if self.phase == "retreat" else [self.home_rad]
        else:
            self.phase = "pick"
            self.plan = self._plan_pick(data, q)

    def _replan(self, data: mujoco.MjData) -> None:
        try:
            self._plan_phase(data)
        except Unreachable as error:  # hold still rather than flail
            self.gave_up = str(error)
            self.phase = "done"
            self.plan = [self.last_target]

    # ---------------------------------------------------------------- plans
    def _choose_grip(self, pick_point: np.ndarray, neighbours: np.ndarray,
                     goals: list[np.ndarray] | None = None) -> Grip | None:
        """Smallest tilt that reaches the piece and a goal (`goals`, by default the leg's; of several along a
        capture area, the middle of the longest run that it reaches: a point at the edge of the arm's reach fails
        the plan's own waypoints), which becomes `goal`."""
        goals = self.goals if goals is None else goals
        along_rank = np.array([0.0, 1.0, 0.0])
        hint = along_rank if self.kind == "pawn" else np.array([-np.sin(self.yaw), np.cos(self.yaw), 0.0])
        self._reach = {}
        for tilt_deg in TILTS_DEG:
            grips = [self._grip_for(pick_point, goal, np.deg2rad(tilt_deg), hint, neighbours) for goal in goals]
            chosen = middle_of_longest_run([grip is not None for grip in grips])
            if chosen is not None:
                self.goal = goals[chosen]
                return grips[chosen]
        return None

    def _relay_grip(self, pick_point: np.ndarray, neighbours: np.ndarray) -> Grip | None:
        """When no tilt reaches both the piece and its square (a long move between the far and the near ranks: the
        arm reaches a point at only one or two tilts, which depend on its distance), the grip that sets the piece
        down on the way on a free square from which another grip reaches the goal (`goal` becomes that square);
        None when no candidate square serves."""
        goal = self.goals[0]
        for centre in relay_squares(self.scene.board, neighbours, pick_point[:2], goal):
            relay = np.array([*centre, self.surface + self.shape.grasp_height])
            if self._choose_grip(relay, neighbours) is None:
                continue
            grip = self._choose_grip(pick_point, neighbours, goals=[centre])
            if grip is not None:
                return grip
        self.goal = goal
        return None

    def _grip_for(self, pick_point: np.ndarray, goal: np.ndarray, tilt: float, hint: np.ndarray,
                  neighbours: np.ndarray) -> Grip | None:
        """The grip at `tilt` that reaches the piece and `goal`, if any; of the two ways round, the moving jaw
        (which opens farther from the piece than the fixed one) goes to the side with more room first."""
        place_point = np.array([goal[0], goal[1], self.surface + self.shape.grasp_height])
        candidates = []
        for sign in (1.0, -1.0):
            pick_c = closing_for(pick_point, sign * hint, tilt)
            place_c = closing_for(place_point, pick_c if tilt == 0 else sign * hint, tilt)
            room = min(jaw_room(pick_point, pick_c, neighbours), jaw_room(place_point, place_c, neighbours))
            candidates.append((room, sign, pick_c, place_c))
        # the carry reaches the goal at the lift's height, above the hover when the goal stands lower
        carry = max(HOVER + 0.01, pick_point[2] + CARRY_CLEARANCE + 0.005 - place_point[2])
        for _, _, pick_c, place_c in sorted(candidates, key=lambda item: (-item[0], -item[1])):
            poses = [grasp_pose(p + [0.0, 0.0, dz], c, tilt)
                     for p, c, top in ((pick_point, pick_c, HOVER + 0.01), (place_point, place_c, carry))
                     for dz in (0.0, top)]
            if all(self._reachable(pose) for pose in poses):
                return Grip(tilt=tilt, pick_closing=pick_c, place_closing=place_c)
        return None

    def _reachable(self, pose: Pose) -> bool:
        """Whether IK reaches `pose`; answers are kept for the plan being chosen (`_choose_grip` asks about the
        piece's poses once for every goal along a capture area)."""
        key = (*np.round(pose.position, 6), *np.round(pose.approach, 6), *np.round(pose.closing, 6))
        if key not in self._reach:
            self._reach[key] = self.ik.solve(pose, self.home_rad[:5], self.rng, restarts=6).ok
        return self._reach[key]

    def _plan_pick(self, data: mujoco.MjData, q: np.ndarray) -> list[np.ndarray]:
        position = self._piece(data)
        pick = position + np.array([0.0, 0.0, self.shape.grasp_height])
        neighbours = self._neighbours(data)
        self.grip = self._choose_grip(pick, neighbours)
        if self.grip is None and self.area is None:
            self.grip = self._relay_grip(pick, neighbours)
        if self.grip is None:
            raise Unreachable("no approach tilt reaches both the piece and its goal")
        c = self.grip.pick_closing
        aim = pick + GRASP_OFFSET * c
        hover = aim + np.array([0.0, 0.0, HOVER])
        lift = aim + np.array([0.0, 0.0, CARRY_CLEARANCE + 0.005])
        tcp = data.site_xpos[self.scene.tcp_site].copy()
        descent = self._resumable(data, tcp, aim, hover, c)
        gripper_open = q[5] > GRIPPER_OPEN_RAD - 0.02
        if descent and tcp[2] - aim[2] < 0.002:  # at the grasp point: close (or go on closing) here
            plan = [q]
        elif descent and gripper_open:
            plan = self._line(q, tcp, aim, c, GRIPPER_OPEN_RAD)
        else:
            plan = self._open_gripper(q, 0.3)
            if self.leg > 0:
                plan += self._rise(plan[-1], tcp, data.site_xmat[self.scene.tcp_site].reshape(3, 3)[:, 0])
            plan += self._free_move(plan[-1], hover, c)
            plan += self._line(plan[-1], hover, aim, c, GRIPPER_OPEN_RAD)
        plan += self._gripper(plan[-1], GRIPPER_CLOSED_RAD, 0.6)
        plan += self._line(plan[-1], aim, lift, c, GRIPPER_CLOSED_RAD)
        return plan

    def _rise(self, q: np.ndarray, tcp: np.ndarray, closing: np.ndarray) -> list[np.ndarray]:
        """From the last leg's release, low beside the board: straight up, as high as `TRAVEL_HEIGHTS` reach, before
        crossing the board (a joint-space move from down there sweeps the jaws through the near ranks)."""
        for height in TRAVEL_HEIGHTS:
            if tcp[2] >= height:
                return []
            try:
                return self._line(q, tcp, np.array([tcp[0], tcp[1], height]), closing, q[5], keep_orientation=True)
            except Unreachable:
                continue
        return []

    def _plan_place(self, data: mujoco.MjData, q: np.ndarray) -> list[np.ndarray]:
        position = self._piece(data)
        tcp = data.site_xpos[self.scene.tcp_site].copy()
        rot = data.site_xmat[self.scene.tcp_site].reshape(3, 3)
        in_hand = rot.T @ (position - tcp)  # piece base in the tcp frame
        if self.grip is None:
            self.grip = self._grip_in_hand(tcp, rot, in_hand)
        c, tcp_goal = self._place_target(self.grip, in_hand)
        carry_z = max(tcp[2], tcp_goal[2] + CARRY_CLEARANCE)
        above = tcp_goal + np.array([0.0, 0.0, carry_z - tcp_goal[2]])
        near = tcp_goal + np.array([0.0, 0.0, 0.01])
        closed = GRIPPER_CLOSED_RAD
        plan: list[np.ndarray] = []
        if self._resumable(data, tcp, tcp_goal, above, c):  # already lowering the piece onto its square
            q_closed = np.append(q[:5], closed)
            plan += self._line(q_closed, tcp, near, c, closed) if tcp[2] > near[2] else [q_closed]
            plan += self._line(plan[-1], tcp if tcp[2] <= near[2] else near, tcp_goal, c, closed,
                               speed=LINEAR_SPEED / 3)
        else:
            plan += self._line(np.append(q[:5], closed), tcp, np.array([tcp[0], tcp[1], carry_z]), rot[:, 0],
                               closed, keep_orientation=True)
            plan += self._free_move(plan[-1], above, c, gripper=closed)
            plan += self._line(plan[-1], above, near, c, closed)
            plan += self._line(plan[-1], near, tcp_goal, c, closed, speed=LINEAR_SPEED / 3)
        plan += self._gripper(plan[-1], GRIPPER_OPEN_RAD, 0.4)
        # The piece was pushed against the fixed pad: step away from it before rising, or it drags the piece.
        unstick = tcp_goal - RELEASE_SHIFT * c
        plan += self._line(plan[-1], tcp_goal, unstick, c, GRIPPER_OPEN_RAD, speed=LINEAR_SPEED / 3)
        plan += self._line(plan[-1], unstick, unstick + np.array([0.0, 0.0, HOVER]), c, GRIPPER_OPEN_RAD)
        return plan

    def _place_target(self, grip: Grip, in_hand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(closing direction, tcp position) that set the piece held at `in_hand` (its base in the tcp frame) on the
        goal square, pressed `PLACE_PRESS` into it."""
        c = closing_for(np.array([*self.goal, 0.0]), grip.place_closing, grip.tilt)
        pose = grasp_pose(np.array([*self.goal, 0.1]), c, grip.tilt)
        rot_place = np.column_stack([pose.closing, np.cross(-pose.approach, pose.closing), -pose.approach])
        base_goal = np.array([self.goal[0], self.goal[1], self.surface - PLACE_PRESS])
        return c, base_goal - rot_place @ in_hand

    def _grip_in_hand(self, tcp: np.ndarray, rot: np.ndarray, in_hand: np.ndarray) -> Grip:
        """Taking over with the piece already in the jaws: the jaws keep closing the way they close now, and the
        place uses the reachable tilt nearest the hand's present one, so the piece lands as upright as it is held
        (far squares are out of reach at tilt 0)."""
        closing = rot[:, 0] * np.array([1.0, 1.0, 0.0])
        closing = closing / np.linalg.norm(closing) if np.linalg.norm(closing) > 1e-6 else rot[:, 0]
        radial = np.array([tcp[0], tcp[1], 0.0]) / np.linalg.norm(tcp[:2])
        approach = -rot[:, 2]
        present = np.rad2deg(np.arctan2(np.dot(approach, radial), -approach[2]))
        self._reach = {}
        for tilt_deg in sorted(TILTS_DEG, key=lambda tilt: abs(tilt - present)):
            grip = Grip(tilt=np.deg2rad(tilt_deg), pick_closing=closing, place_closing=closing)
            reached = []
            for goal in self.goals:
                self.goal = goal
                c, tcp_goal = self._place_target(grip, in_hand)
                above = tcp_goal + np.array([0.0, 0.0, max(CARRY_CLEARANCE, tcp[2] - tcp_goal[2])])
                reached.append(all(self._reachable(grasp_pose(point, c, grip.tilt)) for point in (tcp_goal, above)))
            chosen = middle_of_longest_run(reached)
            if chosen is not None:
                self.goal = self.goals[chosen]
                return grip
        raise Unreachable("no approach tilt places the piece in hand")

    def _plan_retreat(self, data: mujoco.MjData, q: np.ndarray) -> list[np.ndarray]:
        opening = self._open_gripper(q, 0.2)
        tcp = data.site_xpos[self.scene.tcp_site].copy()
        if tcp[2] - self._piece(data)[2] < self.shape.grasp_height + HOVER / 2:
            # Taking over while the jaws let go: step off the fixed pad and rise first, as the place plan does,
            # or the jaws drag the piece on the way home.
            c = data.site_xmat[self.scene.tcp_site].reshape(3, 3)[:, 0].copy()
            unstick = tcp - RELEASE_SHIFT * c
            opening += self._line(opening[-1], tcp, unstick, c, GRIPPER_OPEN_RAD, speed=LINEAR_SPEED / 3,
                                  keep_orientation=True)
            opening += self._line(opening[-1], unstick, unstick + np.array([0.0, 0.0, HOVER]), c, GRIPPER_OPEN_RAD,
                                  keep_orientation=True)
        return opening + self._joint_move(opening[-1], self.home_rad)

    def _resumable(self, data: mujoco.MjData, tcp: np.ndarray, bottom: np.ndarray, top: np.ndarray,
                   closing: np.ndarray) -> bool:
        """Whether the tcp is on the vertical descent from `top` to `bottom` (within `RESUME_RADIUS`, 2 mm of slack
        in height), with the jaws closing along `closing`: where a plan that had brought it there would go on."""
        rot = data.site_xmat[self.scene.tcp_site].reshape(3, 3)
        return bool(np.linalg.norm(tcp[:2] - bottom[:2]) <= RESUME_RADIUS
                    and bottom[2] - 0.002 <= tcp[2] <= top[2] + 0.002
                    and np.dot(rot[:, 0], closing) >= np.cos(np.deg2rad(RESUME_ANGLE_DEG)))


class ExpertDriver:
    """The scripted expert driving a `ChessEnv`, from whatever state its episode is in."""

    def __init__(self, env):
        self.env = env
        self.expert = Expert(env.scene, dt=1.0 / env.cfg.physics.control_hz, home_rad=env.rest_rad)

    def action(self) -> np.ndarray:
        """The expert's next joint target (6,) from the env's current state (it takes over from anywhere)."""
        if getattr(self.expert, "task", None) is not self.env.task:
            self.expert.reset(self.env.task, self.env.leg_slots)
        return self.expert.act(self.env.data)

    def chunk(self, steps: int, film: bool = False):
        """The expert drives up to `steps` control steps, deciding each after the last; returns what
        `ChessEnv.step_chunk` returns."""
        return self.env.step_each(self.action, steps, film)

    @contextmanager
    def on_a_copy(self):
        """Inside the block the expert, planning afresh, may drive the env from its current state; afterwards the
        episode is back where it was (physics, judge, step count, rewards paid) and the expert replans."""
        saved = self.env.save_state()
        self.expert.reset(self.env.task, self.env.leg_slots, self.env.data)
        try:
            yield
        finally:
            self.env.restore_state(saved)
            self.expert.reset(self.env.task, self.env.leg_slots)

    def solves(self) -> bool:
        """Run the expert to the end on a copy of the env's current state; the episode is left untouched."""
        with self.on_a_copy():
            while True:
                _, terminated, truncated, info = self.env.advance(self.expert.act(self.env.data))
                if terminated or truncated:
                    return info["end"] == "success"
