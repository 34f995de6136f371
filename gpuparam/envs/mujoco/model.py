"""A robot's MJCF model: loading Gymnasium's assets, component names, physical param specs."""

from __future__ import annotations

import os
from dataclasses import dataclass

import mujoco
import numpy as np

from gpuparam.spec import ParamSpec

# the per-element physical parameters -> the Components field naming their elements
PER_ELEMENT = {"body_mass": "bodies", "geom_friction": "geoms", "dof_damping": "dofs",
               "dof_armature": "dofs", "actuator_gear": "actuators"}
CONES = {"pyramidal": mujoco.mjtCone.mjCONE_PYRAMIDAL, "elliptic": mujoco.mjtCone.mjCONE_ELLIPTIC}


def has_muscles(mjm: mujoco.MjModel) -> bool:
    """Whether ``mjm`` has muscle actuators: the one place MuJoCo Warp's step reads
    ``actuator_acc0``, which depends on the gear, so only there a gear write recomputes the
    derived constants (the Gymnasium robots have none: their gear writes leave
    ``actuator_acc0`` at the model's value)."""
    return bool((mjm.actuator_gaintype == int(mujoco.mjtGain.mjGAIN_MUSCLE)).any()
                or (mjm.actuator_biastype == int(mujoco.mjtBias.mjBIAS_MUSCLE)).any())


def asset_path(xml_file: str) -> str:
    """Path of one of Gymnasium's MuJoCo assets (``"ant.xml"``, ...)."""
    import gymnasium

    return os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets", xml_file)


def load_model(xml_file: str, cone: str | None = None, solver: int | None = None) -> mujoco.MjModel:
    """Compile ``xml_file`` (a Gymnasium asset name or a path) with MuJoCo.

    Args:
        cone: ``None`` keeps the XML's friction cone (Gymnasium's: pyramidal),
            ``"pyramidal"`` or ``"elliptic"`` sets it.
        solver: a ``mujoco.mjtSolver`` to use instead of the XML's, or ``None``.
    """
    cone = check_cone(cone)
    path = xml_file if os.path.isabs(xml_file) else asset_path(xml_file)
    mjm = _compile(mujoco.MjSpec.from_file(path))
    if cone is not None:
        mjm.opt.cone = cone
    if solver is not None:
        mjm.opt.solver = solver
    return mjm


def check_cone(cone: str | None) -> mujoco.mjtCone | None:
    """The ``mujoco.mjtCone`` of ``cone`` (``"pyramidal"`` or ``"elliptic"``; ``None``
    stays ``None``: the XML's), or a ``ValueError`` naming the valid ones."""
    if cone is None:
        return None
    if not isinstance(cone, str) or cone not in CONES:
        raise ValueError(f"cone: expected one of {tuple(CONES)} or None, got {cone!r}")
    return CONES[cone]


def _compile(spec: mujoco.MjSpec) -> mujoco.MjModel:
    """``spec.compile()``, with a ``<compiler settotalmass=...>`` (Gymnasium's
    half_cheetah.xml has one) applied as MuJoCo's deprecation warning for it says
    (``mj_setTotalmass``, ``mj_setConst``): no warning, no ``MUJOCO_LOG.TXT``, and the model
    equals ``from_xml_path``'s array for array (tested), the two mass-dependent statistics
    set as the compiler sets them unless the XML gives them (``meanmass``: the mean mass of
    bodies 1..; ``meaninertia``: the mean diagonal of the mass matrix at ``qpos0``)."""
    total = spec.compiler.settotalmass
    if not total > 0:
        return spec.compile()
    spec.compiler.settotalmass = -1.0
    mjm = spec.compile()
    mujoco.mj_setTotalmass(mjm, total)
    data = mujoco.MjData(mjm)
    mujoco.mj_setConst(mjm, data)
    # sums in the compiler's order, so with its rounding: np.cumsum adds in order (np.sum
    # adds pairwise)
    if np.isnan(spec.stat.meanmass) and mjm.nbody > 1:
        mjm.stat.meanmass = np.cumsum(mjm.body_mass[1:])[-1] / (mjm.nbody - 1)
    if np.isnan(spec.stat.meaninertia) and mjm.nv > 0:
        mujoco.mj_resetData(mjm, data)  # qpos0
        mujoco.mj_forward(mjm, data)
        full = np.zeros((mjm.nv, mjm.nv))
        mujoco.mj_fullM(mjm, data, full)
        mjm.stat.meaninertia = np.cumsum(np.diag(full))[-1] / mjm.nv
    return mjm


def _name(mjm: mujoco.MjModel, obj: int, i: int, prefix: str) -> str:
    return mujoco.mj_id2name(mjm, obj, i) or f"{prefix}{i}"


def _dof_names(mjm: mujoco.MjModel) -> tuple[str, ...]:
    names = []
    for j in range(mjm.njnt):
        jn = _name(mjm, mujoco.mjtObj.mjOBJ_JOINT, j, "joint")
        n = {0: 6, 1: 3}.get(int(mjm.jnt_type[j]), 1)  # free, ball, slide/hinge
        names += [jn] if n == 1 else [f"{jn}[{k}]" for k in range(n)]
    return tuple(names)


def _actuator_name(mjm: mujoco.MjModel, i: int) -> str:
    joint = int(mjm.actuator_trntype[i]) == int(mujoco.mjtTrn.mjTRN_JOINT)
    if joint and not mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_ACTUATOR, i):  # Ant's
        return _name(mjm, mujoco.mjtObj.mjOBJ_JOINT, int(mjm.actuator_trnid[i, 0]), "joint")
    return _name(mjm, mujoco.mjtObj.mjOBJ_ACTUATOR, i, "actuator")


@dataclass(frozen=True)
class Components:
    """Readable names of one robot's components, in MuJoCo's index order.

    Attributes:
        bodies: the bodies that move (``body_mass`` components: MuJoCo bodies 1.., the
            world body 0 has no mass).
        geoms: every geom (``geom_friction`` components; unnamed geoms are ``"geom<i>"``).
        dofs: every degree of freedom (``dof_damping``, ``dof_armature``): the joint's
            name, with ``[k]`` appended for the 6 dofs of a free joint (3 of a ball joint).
        actuators: every actuator (``actuator_gear``): its name, or for an unnamed one
            the name of the joint it drives (Ant's ``"hip_1"``...), else ``"actuator<i>"``.
    """

    bodies: tuple[str, ...]
    geoms: tuple[str, ...]
    dofs: tuple[str, ...]
    actuators: tuple[str, ...]

    @classmethod
    def of(cls, mjm: mujoco.MjModel) -> Components:
        o = mujoco.mjtObj
        return cls(
            bodies=tuple(_name(mjm, o.mjOBJ_BODY, i, "body") for i in range(1, mjm.nbody)),
            geoms=tuple(_name(mjm, o.mjOBJ_GEOM, i, "geom") for i in range(mjm.ngeom)),
            dofs=_dof_names(mjm),
            actuators=tuple(_actuator_name(mjm, i) for i in range(mjm.nu)),
        )


def f32(values: np.ndarray) -> tuple[float, ...]:
    """``values`` rounded to float32 (the parameter table's type), as Python floats."""
    return tuple(np.asarray(values, dtype=np.float32).tolist())  # host-ok: NumPy at model build


def physical_specs(mjm: mujoco.MjModel) -> tuple[ParamSpec, ...]:
    """The per-world physical parameters of ``mjm``, defaults from the model."""
    return (
        ParamSpec("body_mass", f32(mjm.body_mass[1:]), 1e-6, 1e6, shape=(mjm.nbody - 1,),
                  unit="kg", doc="mass of each moving body (the derived constants follow a write)"),
        ParamSpec("geom_friction", f32(mjm.geom_friction[:, 0]), 0.0, 100.0,
                  shape=(mjm.ngeom,), doc="sliding friction of each geom"),
        ParamSpec("dof_damping", f32(mjm.dof_damping), 0.0, 1e6, shape=(mjm.nv,),
                  unit="N m s/rad", doc="damping of each dof"),
        ParamSpec("dof_armature", f32(mjm.dof_armature), 0.0, 1e6, shape=(mjm.nv,),
                  unit="kg m^2", doc="armature inertia of each dof (the derived constants follow)"),
        ParamSpec("actuator_gear", f32(mjm.actuator_gear[:, 0]), 1e-6, 1e6, shape=(mjm.nu,),
                  doc="gear (force per unit control) of each actuator; never 0"),
        ParamSpec("gravity", f32(mjm.opt.gravity), -1e3, 1e3, shape=(3,), unit="m/s^2",
                  doc="gravitational acceleration vector"),
    )
