"""Plots of the packing benchmark (matplotlib Agg, no pyplot global state).

Three figures, each meant to be read without the code:

``devices-in-use.png``
    Locked devices over the run for both policies, the offline reference and the lower
    bound; below, each one's distance from the bound, where the differences of a few
    devices are visible.
``lock-maps.png``
    Every device at the end of the run, the two policies on the same grid one above the
    other. Colour is how full a device is (one colour per slot count, keyed by the colour
    bar), the number in a cell is its lock value, and a thick red outline marks a
    *surplus* device: one of a value's emptiest devices beyond the ``ceil(pods / slots)``
    it needs. The outlines are what differs between the policies.
``surplus-by-value.png``
    Surplus devices per lock value at the end, both policies and the offline reference
    side by side: which values hold extra devices, and how many.

Colour does not encode the lock value: 32 values cannot get 32 colours a reader tells
apart, and what the maps are for is the fill and the surplus, which a value number
beside them labels directly.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dra_affinity.sim.workload import Arrival, WorkloadSpec

if TYPE_CHECKING:
    from dra_affinity.bench.packing import EventStream, PolicyRun
    from dra_affinity.bench.packing.offline import OfflineSchedule

#: Nodes per row band of the lock maps.
LOCK_MAP_NODES_PER_BAND = 25

#: One colour per series, the same in every figure (colour-blind safe, Okabe-Ito).
COLOURS = {"firstfit": "#D55E00", "affinity": "#009E73", "offline": "#0072B2",
           "bound": "#000000"}
LABELS = {"firstfit": "first-fit (alpha)", "affinity": "affinity scoring",
          "offline": "offline reference (hindsight, no moves)"}
SURPLUS = "#E41A1C"

Cell = tuple[int | None, int]  # (lock value or None when clean, slots in use)


def _save(fig: Any, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    # No software/version or date in the metadata: the same run writes the same bytes.
    fig.savefig(path, dpi=110, metadata={"Software": None})


def surplus_cells(lock_map: Sequence[Sequence[Cell]], slots: int) -> set[tuple[int, int]]:
    """(node, device) of every surplus device: for each value, its devices beyond
    ``ceil(pods / slots)``, taking the emptiest first (then the last in node order), which
    are the ones perfect repacking would free."""
    by_value: dict[int, list[tuple[int, int, int]]] = {}
    for i, row in enumerate(lock_map):
        for j, (value, used) in enumerate(row):
            if value is not None:
                by_value.setdefault(value, []).append((used, i, j))
    out: set[tuple[int, int]] = set()
    for cells in by_value.values():
        need = math.ceil(sum(u for u, _i, _j in cells) / slots)
        cells.sort(key=lambda c: (c[0], -c[1], -c[2]))
        out.update((i, j) for _u, i, j in cells[:len(cells) - need])
    return out


def surplus_by_value(lock_map: Sequence[Sequence[Cell]], slots: int) -> Counter[int]:
    """Devices each value holds beyond ``ceil(pods / slots)``."""
    held: Counter[int] = Counter()
    pods: Counter[int] = Counter()
    for row in lock_map:
        for value, used in row:
            if value is not None:
                held[value] += 1
                pods[value] += used
    return Counter({v: held[v] - math.ceil(pods[v] / slots) for v in held})


def offline_lock_map(spec: WorkloadSpec, es: EventStream, off: OfflineSchedule
                     ) -> list[list[Cell]]:
    """The offline schedule's devices at the end of the stream, as a lock map."""
    running: dict[str, int] = {}
    for ev in es.events:
        if isinstance(ev, Arrival):
            running[ev.pod] = ev.value
        else:
            del running[ev.pod]
    d = spec.devices_per_node
    cells: list[list[Cell]] = [[(None, 0)] * d for _ in range(spec.nodes)]
    for pod, value in running.items():
        node, dev = divmod(off.assignment[pod], d)
        if node < spec.nodes:
            cells[node][dev] = (value, cells[node][dev][1] + 1)
    return cells


def write_plots(folder: Path, spec: WorkloadSpec, es: EventStream, bound: Sequence[int],
                runs: dict[str, PolicyRun], off: OfflineSchedule) -> list[str]:
    """Write the three PNGs into ``folder``; returns their file names."""
    folder.mkdir(parents=True, exist_ok=True)
    _devices_in_use(folder / "devices-in-use.png", spec, es, bound, runs, off)
    _lock_maps(folder / "lock-maps.png", spec, runs)
    maps = {name: r.lock_map for name, r in runs.items()}
    maps["offline"] = offline_lock_map(spec, es, off)
    _surplus_by_value(folder / "surplus-by-value.png", spec, maps)
    return ["devices-in-use.png", "lock-maps.png", "surplus-by-value.png"]


def _devices_in_use(path: Path, spec: WorkloadSpec, es: EventStream, bound: Sequence[int],
                    runs: dict[str, PolicyRun], off: OfflineSchedule) -> None:
    from matplotlib.figure import Figure

    total_devices = spec.nodes * spec.devices_per_node
    x = range(len(bound))
    series = {**{name: r.locked for name, r in runs.items()}, "offline": off.locked}
    peaks = {**{name: r.devices_used for name, r in runs.items()}, "offline": off.devices_used}
    fig = Figure(figsize=(11, 7.5), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(1, 1))
    peak_bound = max(bound, default=0)
    top.plot(x, bound, color=COLOURS["bound"], linestyle="--", linewidth=1.2,
             label=f"lower bound (repack at will), peak {peak_bound}")
    for name, ys in series.items():
        ratio = peaks[name] / peak_bound if peak_bound else 0.0
        top.plot(x, ys, color=COLOURS[name], linewidth=1.4,
                 label=f"{LABELS[name]}: peak {peaks[name]} ({ratio:.3f} x bound)")
        bottom.plot(x, [a - b for a, b in zip(ys, bound, strict=True)], color=COLOURS[name],
                    linewidth=1.3, label=LABELS[name])
    top.axhline(total_devices, color="0.55", linestyle=":", linewidth=1)
    top.text(0, total_devices, f" cluster: {total_devices} devices", va="bottom", fontsize=10,
             color="0.35")
    for ax in (top, bottom):
        if es.steady_from is not None:
            ax.axvline(es.steady_from, color="0.5", linewidth=0.9, linestyle="-.")
        ax.grid(True, color="0.9")
        ax.tick_params(labelsize=10)
    if es.steady_from is not None:
        top.text(es.steady_from, total_devices * 0.55, f"  steady state from here: {es.target} pods "
                 f"({spec.fill:.0%} of slots), running pods replaced", fontsize=10, color="0.3")
    top.set_ylim(0, total_devices * 1.1)
    top.set_ylabel("locked devices", fontsize=11)
    top.set_title(f"Locked devices over the run ({spec.nodes} nodes x {spec.devices_per_node} "
                  f"devices x {spec.slots} slots, {spec.values} values, Zipf {spec.zipf}, "
                  f"churn {spec.churn}, seed {spec.seed})", fontsize=12)
    top.legend(loc="lower right", fontsize=10)
    bottom.axhline(0, color=COLOURS["bound"], linestyle="--", linewidth=1)
    bottom.set_ylabel("devices above the lower bound", fontsize=11)
    bottom.set_xlabel("event (arrival or departure)", fontsize=11)
    bottom.set_title("Distance from the bound: the gap between the offline line and a "
                     "policy is what choosing better online could still win", fontsize=11)
    bottom.legend(loc="upper left", fontsize=10)
    _save(fig, path)


def _lock_maps(path: Path, spec: WorkloadSpec, runs: dict[str, PolicyRun]) -> None:
    """Both policies' final devices on the same grid, stacked, with one colour key."""
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import BoundaryNorm, ListedColormap
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    n, d, slots = spec.nodes, spec.devices_per_node, spec.slots
    per_band = min(n, LOCK_MAP_NODES_PER_BAND)
    bands = math.ceil(n / per_band)
    gap = 1.2  # rows between bands (room for the node numbers)
    height = bands * d + (bands - 1) * gap
    base = colormaps["YlGnBu"]
    cmap = ListedColormap([base(0.15 + 0.8 * k / max(1, slots - 1)) for k in range(slots)])
    norm = BoundaryNorm([k + 0.5 for k in range(slots + 1)], slots)
    cell = 0.5  # inches
    names = list(runs)
    fig = Figure(figsize=(per_band * cell + 2.2, len(names) * (height * cell + 1.2) + 1.0),
                 layout="constrained")
    axes = fig.subplots(len(names), 1, squeeze=False)[:, 0]
    for ax, name in zip(axes, names, strict=True):
        r = runs[name]
        surplus = surplus_cells(r.lock_map, slots)
        for i, row in enumerate(r.lock_map):
            band, col = divmod(i, per_band)
            top = band * (d + gap)
            ax.text(col + 0.5, top + d + 0.12, str(i), ha="center", va="top", fontsize=8,
                    color="0.35")
            for j, (value, used) in enumerate(row):
                x0, y0 = col + 0.06, top + j + 0.06
                if value is None:
                    ax.add_patch(Rectangle((x0, y0), 0.88, 0.88, facecolor="white",
                                           edgecolor="0.7", linewidth=0.7, linestyle=(0, (2, 2))))
                    continue
                colour = cmap(norm(used))
                ax.add_patch(Rectangle((x0, y0), 0.88, 0.88, facecolor=colour, edgecolor="none"))
                if (i, j) in surplus:
                    ax.add_patch(Rectangle((col + 0.1, top + j + 0.1), 0.8, 0.8, fill=False,
                                           edgecolor=SURPLUS, linewidth=2.4))
                dark = used > slots // 2
                ax.text(col + 0.5, top + j + 0.5, str(value), ha="center", va="center",
                        fontsize=9, color="white" if dark else "black",
                        fontweight="bold" if (i, j) in surplus else "normal")
        ax.set_xlim(0, per_band)
        ax.set_ylim(height + 0.3, -0.1)
        ax.set_xticks([])
        ticks = [band * (d + gap) + j + 0.5 for band in range(bands) for j in range(d)]
        ax.set_yticks(ticks, [f"nic{j}" for _ in range(bands) for j in range(d)], fontsize=9)
        for s in ax.spines.values():
            s.set_visible(False)
        ax.tick_params(length=0)
        extra = len(surplus)
        ax.set_title(f"{LABELS[name]}: {r.devices_at_end} locked devices at the end, "
                     f"{extra} of them surplus (red outline)", fontsize=12, loc="left")
    axes[-1].set_xlabel(f"node (number above each column); number in a cell = lock value "
                        f"(0 = most frequent); dashed = clean; red outline = a device the "
                        f"value holds beyond ceil(pods / {slots})", fontsize=10)
    bar = fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=list(axes), shrink=0.6,
                       ticks=range(1, slots + 1))
    bar.set_label(f"slots in use (of {slots})", fontsize=11)
    bar.ax.tick_params(labelsize=10)
    _save(fig, path)


def _surplus_by_value(path: Path, spec: WorkloadSpec,
                      maps: Mapping[str, Sequence[Sequence[Cell]]]) -> None:
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    per = {name: surplus_by_value(m, spec.slots) for name, m in maps.items()}
    values = range(spec.values)
    width = 0.8 / len(per)
    fig = Figure(figsize=(12, 4.8), layout="constrained")
    ax = fig.subplots()
    for k, (name, counts) in enumerate(per.items()):
        xs = [v - 0.4 + width * (k + 0.5) for v in values]
        ax.bar(xs, [counts.get(v, 0) for v in values], width=width, color=COLOURS[name],
               label=f"{LABELS[name]}: {sum(counts.values())} surplus devices in all")
    ax.set_xticks(list(values), [str(v) for v in values], fontsize=9)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.tick_params(axis="y", labelsize=10)
    ax.set_xlim(-0.6, spec.values - 0.4)
    ax.grid(True, axis="y", color="0.9")
    ax.set_axisbelow(True)
    ax.set_xlabel("lock value (0 = most frequent, Zipf)", fontsize=11)
    ax.set_ylabel(f"devices beyond ceil(pods / {spec.slots})", fontsize=11)
    ax.set_title(f"Surplus devices per value at the end of the run (seed {spec.seed}): "
                 "where each policy strands slots", fontsize=12)
    ax.legend(fontsize=10, loc="upper right")
    _save(fig, path)
