"""The shared parts of veriscale's PNG plots (matplotlib on the Agg backend; ``veriscale[bench]``).

    plt = pyplot()                        # UserError naming the extra when matplotlib is missing
    fig, ax = plt.subplots()
    save_figure(plt, fig, png_path("out.png"))
"""

from __future__ import annotations

from pathlib import Path

from veriscale.errors import UserError, setting


def pyplot():
    """matplotlib.pyplot on the Agg backend (UserError naming the extra when it is missing)."""
    try:
        import matplotlib
    except ImportError:
        raise UserError("plots need matplotlib: run pip install 'veriscale[bench]' (or pip install matplotlib)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def png_path(path: str | Path) -> Path:
    """``path`` as a Path, refused unless it ends in .png."""
    out = Path(path)
    if out.suffix.lower() != ".png":
        raise UserError(f"plot file '{path}' should end in .png: the plot is written as PNG")
    return out


def save_figure(plt, fig, out: Path) -> Path:
    """Lay out ``fig``, write it to ``out`` (UserError naming the path if it cannot) and close it."""
    fig.tight_layout()
    try:
        fig.savefig(out, dpi=110)
    except OSError as exc:
        raise UserError(f"cannot write the plot to '{out}' ({exc.strerror}): give {setting('plot')} a writable path") from None
    finally:
        plt.close(fig)
    return out
