"""MjSpec assembly: table, board, SO-101 arm, the 32 chess pieces, cameras and lights.

One model is compiled per process and configuration; a scene (`tasks.Task`) is applied to it by placing the
pieces (`place_task`): every piece of a standard set has a slot, and pieces not on the board (captured) stand
parked in rows beside it. Visual randomisation edits the compiled model's colours, light and cameras, so no
recompilation happens between episodes.

Frames: world x points from the robot's base across the board, z up, table top at z = 0. The gripper's
`tcp` site sits between the jaw pads; its -z axis is the approach direction, its x axis the closing axis.
Collision bits: pieces contype 1 / conaffinity 3, board and table contype 1 / conaffinity 3, arm geoms
contype 2 / conaffinity 0, so the arm touches pieces and board but never itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from chess_sim.config import JOINT_NAMES, BoardConfig, EnvConfig
from chess_sim.sim import assets
from chess_sim.sim.pieces import KINDS, piece_mesh, piece_shape
from chess_sim.sim.tasks import DEFAULT_VISUALS, Task, Visuals

SET_COUNTS = {"pawn": 8, "knight": 2, "bishop": 2, "rook": 2, "queen": 1, "king": 1}
"""Slots per colour: a standard set (positions reached by a few random plies never need more)."""

PAD_Z = -0.098
"""Centre height of the jaw pads in the gripper body frame (the pads span z -0.104 to -0.092 there)."""
PAD_FACE_X = 0.0079
"""The fixed jaw's inner face lies at x = -PAD_FACE_X in the gripper frame (the CAD mesh's fingertip)."""
MOVING_PAD_PARALLEL_RAD = -0.1
"""Gripper angle at which the moving pad stands parallel to the fixed one, 8 mm from it: closed on a 4 mm
grasp section. The moving jaw swings on an arc, so a pad parallel at 0 rad would touch a piece with one edge
and let it pivot (5-8 degrees of tilt in the grip)."""
JAW_SOLREF = (0.004, 1.0)
"""Stiff fingertip contacts: 0.2 mm penetration and 1 degree tilt holding a 4 g pawn (scoping)."""
JAW_SOLIMP = (0.99, 0.999, 0.001, 0.5, 2.0)
JAW_FRICTION = (1.0, 0.005, 0.0001)
"""Rubber-like fingertip friction."""
ARM_COLLISION_BODIES = ("upper_arm", "lower_arm", "wrist")
"""Links whose convex hulls collide with pieces; the gripper body's hull would fill the gap between the jaws,
so the jaws get primitive boxes instead."""
COLLISION_CELL_M = 0.002
"""Grid cell of the simplified meshes whose convex hulls are those links' collision shapes: fixed here, so that
the physics stays the same whatever detail the render meshes (`assets.RENDER_CELL_M`) have."""

FRONT_CAMERA = ((0.52, 0.0, 0.30), (0.21, 0.0, 0.03))
"""(position, look-at) of the fixed `front` camera: across the board, facing the robot."""
OVERVIEW_CAMERA = ((0.32, -0.40, 0.30), (0.21, 0.0, 0.06))
"""(position, look-at) of the `overview` camera used by `chess-sim scene`."""
KEY_LIGHT_POS = (0.35, 0.25, 1.0)


@dataclass(frozen=True)
class PieceSlot:
    kind: str
    color: str
    body: int
    qpos: int
    """Address of the free joint's 7 qpos values (position, quaternion w x y z)."""
    qvel: int
    visual_geom: int
    park_xy: tuple[float, float]


@dataclass
class Scene:
    """A compiled model and the indices every other module needs."""

    model: mujoco.MjModel
    arm_qpos: np.ndarray
    """(6,) qpos addresses of the joints in JOINT_NAMES order."""
    arm_dof: np.ndarray
    """(6,) dof addresses of the same joints."""
    slots: tuple[PieceSlot, ...]
    tcp_site: int
    jaw_geoms: tuple[int, int]
    """(fixed jaw pad, moving jaw pad) geom ids."""
    gripper_geoms: frozenset[int]
    """Every collision geom of the gripper and moving jaw (for 'gripper touches piece' tests)."""
    cameras: dict[str, int]
    square_geoms: tuple[int, int]
    """(light squares, dark squares) visual geom ids."""
    table_geom: int
    default_rgba: np.ndarray
    default_cam: tuple[np.ndarray, np.ndarray]
    default_light: tuple[np.ndarray, np.ndarray]
    """(position, diffuse) of the key light."""
    board_top: float
    board: BoardConfig
    """The board's geometry (square centres: `tasks.square_center`)."""


def build_scene(cfg: EnvConfig) -> Scene:
    spec = mujoco.MjSpec.from_file(str(assets.arm_mjcf()))
    spec.meshdir = str(assets.render_mesh_dir())
    _set_options(spec, cfg)
    _configure_arm(spec, cfg)
    _add_table_and_board(spec, cfg)
    slots = _add_pieces(spec, cfg)
    _add_cameras_and_lights(spec, cfg)
    model = spec.compile()
    _draw_floor_coarsely(model)
    return _index(model, cfg, slots)


FLOOR_GRID_M = 3.0
"""Side of the quads the floor is drawn with. MuJoCo draws an infinite plane as 200 x 200 quads reaching past the
far clip (80k triangles per camera, more than the arm and all pieces together); a finite plane with this grid
reaching as far has 50 x 50. Lighting is computed per vertex, so the floor's shades move a little
(docs/benchmarks.md)."""


def _draw_floor_coarsely(model: mujoco.MjModel) -> None:
    """Give the floor a finite size reaching past the cameras' far clip, with `FLOOR_GRID_M` quads. Set on the
    compiled model: a plane collides as an infinite one whatever its size, and the model's extent (which sets the
    clipping distances) stays that of an infinite floor. Renderers made afterwards draw it so."""
    reach = 1.1 * model.vis.map.zfar * model.stat.extent
    model.geom_size[model.geom("floor").id] = [reach, reach, FLOOR_GRID_M / 2]


def _set_options(spec: mujoco.MjSpec, cfg: EnvConfig) -> None:
    phys = cfg.physics
    spec.modelname = "chess_sim"
    spec.option.timestep = phys.timestep
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    spec.option.solver = mujoco.mjtSolver.mjSOL_NEWTON
    spec.option.impratio = phys.impratio
    spec.option.iterations = phys.iterations
    if phys.sleep:
        spec.option.enableflags |= int(mujoco.mjtEnableBit.mjENBL_SLEEP)
    # Shadows and anti-aliasing cost more than pixels on a software rasteriser (scoping: 4 fps vs 43 fps).
    spec.visual.quality.shadowsize = 0
    spec.visual.quality.offsamples = 0
    spec.visual.global_.offwidth = max(640, cfg.camera.width)
    spec.visual.global_.offheight = max(480, cfg.camera.height)
    spec.visual.headlight.ambient = [0.35, 0.35, 0.35]
    spec.visual.headlight.diffuse = [0.35, 0.35, 0.35]
    spec.visual.headlight.specular = [0.0, 0.0, 0.0]


def _configure_arm(spec: mujoco.MjSpec, cfg: EnvConfig) -> None:
    phys = cfg.physics
    for actuator in spec.actuators:
        force = phys.gripper_force if actuator.name == "gripper" else phys.arm_force
        actuator.gainprm[0] = phys.arm_kp
        actuator.biasprm[:3] = [0.0, -phys.arm_kp, -phys.arm_kv]
        actuator.forcerange = [-force, force]
        actuator.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
    for geom in list(spec.geoms):
        body = geom.parent.name
        is_visual = geom.contype == 0 and geom.conaffinity == 0 and geom.group == 2
        if is_visual:
            continue
        if body in ARM_COLLISION_BODIES and geom.type == mujoco.mjtGeom.mjGEOM_MESH:
            geom.contype, geom.conaffinity, geom.group = 2, 0, 3
            geom.meshname = _collision_mesh(spec, geom.meshname)
        else:  # the wheel's mesh hulls of the base/gripper and its tiny fingertip boxes
            spec.delete(geom)
    for camera in list(spec.cameras):
        spec.delete(camera)

    gripper = spec.body("gripper")
    jaw = spec.body("moving_jaw_so101_v1")
    # priority: a contact takes the jaw's stiff parameters instead of mixing them with the piece's soft defaults.
    pad = dict(contype=2, conaffinity=0, condim=4, group=3, priority=1, friction=JAW_FRICTION, solref=JAW_SOLREF,
               solimp=JAW_SOLIMP, rgba=[0.2, 0.2, 0.9, 0.6])
    finger = dict(contype=2, conaffinity=0, group=3, priority=1, friction=JAW_FRICTION, solref=JAW_SOLREF,
                  solimp=JAW_SOLIMP, rgba=[0.5, 0.5, 0.5, 0.4])
    # Pads: the 2 mm-proud fingertip faces; fingers: the set-back jaw bodies above them.
    moving_face = -PAD_FACE_X + 0.008
    for name, x_face, body in (("fixed", -PAD_FACE_X, gripper), ("moving", moving_face, jaw)):
        sign = -1.0 if name == "fixed" else 1.0
        boxes = (
            (f"{name}_pad", (x_face + sign * 0.002, 0.0, PAD_Z), (0.002, 0.0055, 0.006), pad),
            (f"{name}_finger", (x_face + sign * 0.004, 0.0, -0.081), (0.002, 0.007, 0.011), finger),
        )
        for geom_name, pos, size, style in boxes:
            pos_body, quat_body = _gripper_to_body(spec, body, np.array(pos))
            body.add_geom(name=geom_name, type=mujoco.mjtGeom.mjGEOM_BOX, size=size, pos=pos_body,
                          quat=quat_body, **style)
    gripper.add_site(name="tcp", pos=[0.0, 0.0, PAD_Z], size=[0.002, 0, 0], group=4)


def _gripper_to_body(spec: mujoco.MjSpec, body, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A pose given in the gripper frame (axes aligned with it), expressed in `body`: the gripper itself, or
    the moving jaw as it stands at MOVING_PAD_PARALLEL_RAD (its hinge is the jaw body's z axis)."""
    if body.name == "gripper":
        return pos, np.array([1.0, 0.0, 0.0, 0.0])
    hinge = np.zeros(4)
    mujoco.mju_axisAngle2Quat(hinge, np.array([0.0, 0.0, 1.0]), MOVING_PAD_PARALLEL_RAD)
    jaw_quat = np.zeros(4)
    mujoco.mju_mulQuat(jaw_quat, np.asarray(body.quat, dtype=float), hinge)
    rot = np.zeros(9)
    mujoco.mju_quat2Mat(rot, jaw_quat)
    inverse = np.zeros(4)
    mujoco.mju_negQuat(inverse, jaw_quat)
    return rot.reshape(3, 3).T @ (pos - np.asarray(body.pos, dtype=float)), inverse


TABLE_TOP = 0.0
"""Height of the table's top: parked and captured pieces stand on it (the board's top is `Scene.board_top`)."""
CAPTURE_AREA_RGBA = [0.15, 0.45, 0.25, 1.0]
"""The capture area's strip on the table (green felt): unlike any piece or board colour."""


def _collision_mesh(spec: mujoco.MjSpec, name: str) -> str:
    """The name of a copy of mesh asset `name` read from the `COLLISION_CELL_M` meshes, added on first use."""
    copy_name = f"collision_{name}"
    if spec.mesh(copy_name) is None:
        source = spec.mesh(name)
        spec.add_mesh(name=copy_name, file=str(assets.render_mesh_dir(COLLISION_CELL_M) / source.file),
                      scale=source.scale, refpos=source.refpos, refquat=source.refquat,
                      maxhullvert=source.maxhullvert, inertia=source.inertia)
    return copy_name


def _add_table_and_board(spec: mujoco.MjSpec, cfg: EnvConfig) -> None:
    board = cfg.scene.board
    world = spec.worldbody
    # A piece knocked off the table lands on the floor instead of falling for ever (which the judge would
    # take for a diverging simulation).
    world.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0.0, 0.0, 0.05], pos=[0.0, 0.0, -0.75],
                   rgba=[0.25, 0.25, 0.27, 1.0], contype=1, conaffinity=3)
    world.add_geom(name="table", type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.45, 0.45, 0.02],
                   pos=[0.2, 0.0, -0.02], rgba=list(DEFAULT_VISUALS.table_rgb) + [1.0],
                   contype=1, conaffinity=3, friction=[0.5, 0.005, 0.0001])
    half = 4 * board.square
    border = 0.015
    centre_x = board.near_edge + half
    world.add_geom(name="board", type=mujoco.mjtGeom.mjGEOM_BOX,
                   size=[half + border, half + border, board.thickness / 2],
                   pos=[centre_x, 0.0, board.thickness / 2], rgba=[0.35, 0.2, 0.1, 1.0],
                   contype=1, conaffinity=3, friction=[board.friction, 0.005, 0.0001])
    if cfg.scene.tasks == "captures":  # only there: the other profiles' images stay as they were
        x0, x1, y0, y1 = cfg.scene.capture_area
        world.add_geom(name="capture_area", type=mujoco.mjtGeom.mjGEOM_BOX,
                       size=[(x1 - x0) / 2, (y1 - y0) / 2, 0.0001], pos=[(x0 + x1) / 2, (y0 + y1) / 2, 0.0001],
                       rgba=CAPTURE_AREA_RGBA, contype=0, conaffinity=0, group=1, mass=0.0, density=0.0)
    # The squares are thin visual tiles on the collision board, never touched by contacts. All light squares
    # form one mesh and all dark squares another: two draw calls instead of 64, and
    # each colour is still one geom's rgba.
    for light in (True, False):
        tiles = [(rank, file) for rank in range(8) for file in range(8) if ((rank + file) % 2 == 1) == light]
        vertices, faces = _tiles_mesh(tiles, board)
        name = "light_squares" if light else "dark_squares"
        spec.add_mesh(name=f"mesh_{name}", uservert=vertices.ravel().tolist(), userface=faces.ravel().tolist())
        world.add_geom(name=name, type=mujoco.mjtGeom.mjGEOM_MESH, meshname=f"mesh_{name}",
                       rgba=list(DEFAULT_VISUALS.board_light_rgb if light else DEFAULT_VISUALS.board_dark_rgb)
                       + [1.0], contype=0, conaffinity=0, group=1, mass=0.0, density=0.0)


def _tiles_mesh(tiles: list[tuple[int, int]], board) -> tuple[np.ndarray, np.ndarray]:
    """One mesh of 0.2 mm thick boxes, one per (rank, file), in world coordinates (the geom sits at the origin)."""
    corners = np.array([[x, y, z] for z in (0.0, 1.0) for y in (-1.0, 1.0) for x in (-1.0, 1.0)])
    box_faces = np.array([[0, 2, 1], [1, 2, 3], [4, 5, 6], [5, 7, 6], [0, 1, 4], [1, 5, 4],
                          [2, 6, 3], [3, 6, 7], [0, 4, 2], [2, 4, 6], [1, 3, 5], [3, 7, 5]])
    half = board.square / 2
    vertices, faces = [], []
    for i, (rank, file) in enumerate(tiles):
        centre = np.array([board.near_edge + (rank + 0.5) * board.square, (3.5 - file) * board.square,
                           board.thickness])
        vertices.append(centre + corners * [half, half, 0.0002])
        faces.append(box_faces + 8 * i)
    return np.concatenate(vertices), np.concatenate(faces)


def _park_positions(cfg: EnvConfig) -> dict[str, list[tuple[float, float]]]:
    """Two rows of parking spots beside the board per colour, one spot per slot; with the `captures` tasks white's
    rows stand 30 mm beyond the capture area."""
    board = cfg.scene.board
    edge = 4 * board.square + 0.03
    spots = {}
    for color, side in (("white", -1.0), ("black", 1.0)):
        start = edge
        if cfg.scene.tasks == "captures" and side < 0:
            start = max(edge, -cfg.scene.capture_area[2] + 0.03)
        spots[color] = [(board.near_edge + (i % 8 + 0.5) * board.square, side * (start + (i // 8) * board.square))
                        for i in range(16)]
    return spots


def _add_pieces(spec: mujoco.MjSpec, cfg: EnvConfig) -> list[tuple[str, str, str, tuple[float, float]]]:
    for kind in KINDS:
        vertices, faces = piece_mesh(kind)
        spec.add_mesh(name=f"mesh_{kind}", uservert=vertices.ravel().tolist(), userface=faces.ravel().tolist())
    parking = _park_positions(cfg)
    slots = []
    for color in ("white", "black"):
        spot = iter(parking[color])
        rgba = list(getattr(DEFAULT_VISUALS, f"{color}_piece_rgb")) + [1.0]
        for kind in KINDS:
            shape = piece_shape(kind)
            for n in range(SET_COUNTS[kind]):
                name = f"{color}_{kind}_{n}"
                xy = next(spot)
                body = spec.worldbody.add_body(name=name, pos=[xy[0], xy[1], cfg.scene.board.thickness])
                body.add_freejoint(name=name)
                for i, prim in enumerate(shape.collision):
                    body.add_geom(name=f"{name}_c{i}", type=_GEOM_TYPES[prim.type], size=_pad3(prim.size),
                                  pos=prim.pos, quat=prim.quat, mass=prim.mass, contype=1, conaffinity=3,
                                  group=3, friction=[cfg.scene.board.friction, 0.005, 0.0001])
                body.add_geom(name=f"{name}_visual", type=mujoco.mjtGeom.mjGEOM_MESH, meshname=f"mesh_{kind}",
                              contype=0, conaffinity=0, group=2, rgba=rgba, mass=0.0, density=0.0)
                slots.append((name, kind, color, xy))
    return slots


_GEOM_TYPES = {
    "cylinder": mujoco.mjtGeom.mjGEOM_CYLINDER, "box": mujoco.mjtGeom.mjGEOM_BOX,
    "sphere": mujoco.mjtGeom.mjGEOM_SPHERE, "capsule": mujoco.mjtGeom.mjGEOM_CAPSULE,
    "ellipsoid": mujoco.mjtGeom.mjGEOM_ELLIPSOID,
}


def _pad3(size: tuple[float, ...]) -> list[float]:
    return list(size) + [0.0] * (3 - len(size))


def _look_at_quat(position, target) -> np.ndarray:
    """Quaternion of a MuJoCo camera at `position` looking at `target` with world z up in the image."""
    forward = np.asarray(target, float) - np.asarray(position, float)
    forward /= np.linalg.norm(forward)
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, forward)
    rot = np.column_stack([right, up, -forward])  # camera looks along its -z
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, rot.ravel())
    return quat


def _add_cameras_and_lights(spec: mujoco.MjSpec, cfg: EnvConfig) -> None:
    world = spec.worldbody
    for name, (pos, target), fovy in (("front", FRONT_CAMERA, 50.0), ("overview", OVERVIEW_CAMERA, 50.0)):
        world.add_camera(name=name, pos=pos, quat=_look_at_quat(pos, target), fovy=fovy)
    # Wrist camera on the gripper, behind the jaws, looking along the approach direction at the pads.
    spec.body("gripper").add_camera(name="wrist", pos=[0.0, 0.045, -0.035],
                                    quat=_look_at_quat([0.0, 0.045, -0.035], [0.0, 0.0, -0.11]), fovy=75.0)
    world.add_light(name="key", pos=KEY_LIGHT_POS, dir=[-0.3, -0.2, -1.0],
                    castshadow=0, diffuse=[0.6, 0.6, 0.6], specular=[0.1, 0.1, 0.1])


def _index(model: mujoco.MjModel, cfg: EnvConfig, slots) -> Scene:
    joints = [model.joint(name) for name in JOINT_NAMES]
    piece_slots = []
    for name, kind, color, xy in slots:
        joint = model.joint(name)
        piece_slots.append(PieceSlot(kind=kind, color=color, body=model.body(name).id, qpos=int(joint.qposadr[0]),
                                     qvel=int(joint.dofadr[0]), visual_geom=model.geom(f"{name}_visual").id,
                                     park_xy=xy))
    gripper_bodies = {model.body("gripper").id, model.body("moving_jaw_so101_v1").id}
    gripper_geoms = frozenset(g for g in range(model.ngeom)
                              if model.geom_bodyid[g] in gripper_bodies and model.geom_contype[g])
    return Scene(
        model=model,
        arm_qpos=np.array([int(j.qposadr[0]) for j in joints]),
        arm_dof=np.array([int(j.dofadr[0]) for j in joints]),
        slots=tuple(piece_slots),
        tcp_site=model.site("tcp").id,
        jaw_geoms=(model.geom("fixed_pad").id, model.geom("moving_pad").id),
        gripper_geoms=gripper_geoms,
        cameras={name: model.camera(name).id for name in ("front", "wrist", "overview")},
        square_geoms=(model.geom("light_squares").id, model.geom("dark_squares").id),
        table_geom=model.geom("table").id,
        default_rgba=model.geom_rgba.copy(),
        default_cam=(model.cam_pos.copy(), model.cam_quat.copy()),
        default_light=(model.light_pos[0].copy(), model.light_diffuse[0].copy()),
        board_top=cfg.scene.board.thickness, board=cfg.scene.board,
    )


SETTLE_SECONDS = 0.1
"""Pieces are dropped from 0.2 mm and settle this long at reset, so episodes start at rest."""


def place_task(scene: Scene, data: mujoco.MjData, task: Task, arm_qpos_rad: np.ndarray) -> tuple[int, ...]:
    """Reset `data` to the task's initial state (arm at `arm_qpos_rad`, pieces placed and settled).

    Returns the slot index of each of `task.pieces`, in order. Visuals of the task are applied to the model.
    """
    model = scene.model
    mujoco.mj_resetData(model, data)
    free: dict[tuple[str, str], list[int]] = {}
    for i, slot in enumerate(scene.slots):
        free.setdefault((slot.kind, slot.color), []).append(i)
    assignment = []
    for placement in task.pieces:
        spare = free.get((placement.kind, placement.color))
        if not spare:
            raise ValueError(f"scene {task.seed}/{task.index} needs more {placement.color} {placement.kind}s "
                             f"than a standard set has")
        slot_index = spare.pop(0)
        assignment.append(slot_index)
        _set_free_pose(data, scene.slots[slot_index], placement.x, placement.y, scene.board_top, placement.yaw)
    for spare in free.values():
        for slot_index in spare:
            slot = scene.slots[slot_index]
            _set_free_pose(data, slot, slot.park_xy[0], slot.park_xy[1], TABLE_TOP, 0.0)
    data.qpos[scene.arm_qpos] = arm_qpos_rad
    data.ctrl[:] = arm_qpos_rad
    apply_visuals(scene, task.visuals)
    _settle(scene, data)
    data.time = 0.0
    return tuple(assignment)


def park_piece(scene: Scene, data: mujoco.MjData, slot_index: int) -> None:
    """Stand a piece on its parking spot beside the board and let the scene settle (a game clears each captured
    piece from the capture area before its next move, as a helper at the table would)."""
    slot = scene.slots[slot_index]
    _set_free_pose(data, slot, slot.park_xy[0], slot.park_xy[1], TABLE_TOP, 0.0)
    _settle(scene, data)


def _settle(scene: Scene, data: mujoco.MjData) -> None:
    """`SETTLE_SECONDS` of physics with the controls as they are: placed pieces come to rest."""
    for _ in range(round(SETTLE_SECONDS / scene.model.opt.timestep)):
        mujoco.mj_step(scene.model, data)


def _set_free_pose(data: mujoco.MjData, slot: PieceSlot, x: float, y: float, z: float, yaw: float) -> None:
    data.qpos[slot.qpos:slot.qpos + 7] = [x, y, z + 0.0002, np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)]
    data.qvel[slot.qvel:slot.qvel + 6] = 0.0


def apply_visuals(scene: Scene, visuals: Visuals) -> None:
    """Write a task's colours, light and camera offsets into the model (defaults restored first)."""
    model = scene.model
    model.geom_rgba[:] = scene.default_rgba
    for slot in scene.slots:
        model.geom_rgba[slot.visual_geom, :3] = getattr(visuals, f"{slot.color}_piece_rgb")
    model.geom_rgba[scene.square_geoms[0], :3] = visuals.board_light_rgb
    model.geom_rgba[scene.square_geoms[1], :3] = visuals.board_dark_rgb
    model.geom_rgba[scene.table_geom, :3] = visuals.table_rgb
    model.light_pos[0] = scene.default_light[0] + np.asarray(visuals.light_offset)
    model.light_diffuse[0] = scene.default_light[1] * visuals.light_intensity
    cam_pos, cam_quat = scene.default_cam
    model.cam_pos[:] = cam_pos
    model.cam_quat[:] = cam_quat
    for name, offset in (("front", visuals.front_camera_offset), ("wrist", visuals.wrist_camera_offset)):
        cam = scene.cameras[name]
        model.cam_pos[cam] = cam_pos[cam] + np.asarray(offset[:3])
        jitter = np.zeros(4)
        mujoco.mju_euler2Quat(jitter, np.deg2rad(np.asarray(offset[3:], float)), "xyz")
        mujoco.mju_mulQuat(model.cam_quat[cam], cam_quat[cam], jitter)
