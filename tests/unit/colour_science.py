#!/usr/bin/env python3
"""The engine's colour transforms against an independent implementation: the colour-science
package (PyPI, pinned in scripts/setup.sh). Each built-in camera space decodes a ramp and a
set of saturated colours through ck_colour_apply (the engine's OCIO processors) and through
colour-science's log curve + RGB_to_RGB; the gamut table's primaries are compared too.

  colour_science.py CK_COLOUR_APPLY
"""
import subprocess
import sys
import warnings

warnings.filterwarnings("ignore")
import colour  # noqa: E402
import numpy as np  # noqa: E402

tool = sys.argv[1]


def engine(mode, name, rgb):
    text = "\n".join(" ".join(repr(float(x)) for x in row) for row in rgb)
    out = subprocess.run([tool, mode, name], input=text, capture_output=True, text=True, check=True)
    return np.array([[float(x) for x in line.split()] for line in out.stdout.splitlines()])


def space(*names):
    for n in names:
        if n in colour.RGB_COLOURSPACES:
            return colour.RGB_COLOURSPACES[n]
    raise KeyError(names)


failures = []


def check(what, got, want, tol):
    err = float(np.max(np.abs(np.asarray(got) - np.asarray(want))))
    status = "ok" if err <= tol else "FAIL"
    print(f"{what}: max abs error {err:.2e} (bound {tol:g}) {status}")
    if err > tol:
        failures.append(what)


# (engine name, colour-science log encoding, its arguments, gamut, bound). LogC4 and the D65
# gamuts go straight to Rec.709 in both; the OCIO built-ins pass through ACES AP0 with a
# chromatic adaptation there and back (CAT02 / Bradford), which costs about 1e-4 relative.
cases = [
    ("arri-logc4-awg4", "ARRI LogC4", {}, ("ARRI Wide Gamut 4",), 1e-5),
    ("arri-logc3-ei800-awg", "ARRI LogC3", {"EI": 800}, ("ARRI Wide Gamut 3",), 2e-3),
    ("sony-slog3-sgamut3", "S-Log3", {}, ("S-Gamut3",), 2e-3),
    ("sony-slog3-sgamut3cine", "S-Log3", {}, ("S-Gamut3.Cine",), 2e-3),
    ("red-log3g10-rwg", "Log3G10", {}, ("RED Wide Gamut RGB", "REDWideGamutRGB"), 2e-3),
    ("panasonic-vlog-vgamut", "V-Log", {}, ("V-Gamut",), 2e-3),
    ("canon-clog3-cgamut", "Canon Log 3", {}, ("Cinema Gamut",), 2e-3),
]
rec709 = colour.RGB_COLOURSPACES["ITU-R BT.709"]
ramp = np.array([[v, v, v] for v in (0.0, 0.005, 0.02, 0.09, 0.18, 0.36, 0.72, 1.0, 2.0, 4.0)])
chart = np.array([[0.4, 0.05, 0.03], [0.03, 0.3, 0.05], [0.02, 0.04, 0.5], [0.5, 0.45, 0.02],
                  [0.3, 0.02, 0.35], [0.02, 0.4, 0.45], [0.18, 0.18, 0.18], [0.9, 0.6, 0.3]])
for name, curve, kw, gamut_names, tol in cases:
    g = space(*gamut_names)
    # colour-science's linear camera values for the chart and ramp, in the camera gamut...
    lin_cam = np.vstack([ramp, colour.RGB_to_RGB(chart, rec709, g, chromatic_adaptation_transform=None)])
    code = colour.log_encoding(lin_cam, function=curve, **kw)
    # ...decoded by the engine back to Rec.709, against colour-science's own decode.
    want = colour.RGB_to_RGB(colour.log_decoding(code, function=curve, **kw), g, rec709,
                             chromatic_adaptation_transform=None)
    got = engine("decode", name, code)
    scale = np.maximum(np.abs(want), 1.0)  # relative above 1, absolute below
    check(f"{name} decode vs colour-science {curve} + {g.name}", got / scale, want / scale, tol)

# LogC4 code values straight from the curve (no gamut): grey through the engine's encode.
grey = np.array([[v, v, v] for v in (0.0, 0.18, 1.0, 10.0)])
check("arri-logc4-awg4 encode vs colour-science ARRI LogC4",
      engine("encode", "arri-logc4-awg4", grey), colour.log_encoding(grey, function="ARRI LogC4"), 1e-5)

# The gamut table (engine/src/colour/primaries.cpp) against colour-science's primaries: each
# linear form's matrix from Rec.709 equals colour-science's.
for name, gamut_names in [("arri-logc4-awg4", ("ARRI Wide Gamut 4",)), ("arri-logc3-ei800-awg", ("ARRI Wide Gamut 3",)),
                          ("sony-slog3-sgamut3", ("S-Gamut3",)), ("sony-slog3-sgamut3cine", ("S-Gamut3.Cine",)),
                          ("red-log3g10-rwg", ("RED Wide Gamut RGB", "REDWideGamutRGB")),
                          ("canon-clog2-cgamut", ("Cinema Gamut",)), ("panasonic-vlog-vgamut", ("V-Gamut",)),
                          ("rec2020-linear", ("ITU-R BT.2020",))]:
    g = space(*gamut_names)
    want = colour.RGB_to_RGB(chart, rec709, g, chromatic_adaptation_transform=None)
    check(f"{name} linear form vs colour-science {g.name}", engine("linear", name, chart), want, 1e-5)
for name, cs in [("acescg", "ACEScg"), ("aces2065-1", "ACES2065-1")]:
    want = colour.RGB_to_RGB(chart, rec709, colour.RGB_COLOURSPACES[cs], chromatic_adaptation_transform="Bradford")
    check(f"{name} linear form vs colour-science {cs} (Bradford)", engine("linear", name, chart), want, 1e-4)

if failures:
    print("FAILED:", ", ".join(failures))
    sys.exit(1)
print("colour-science agrees: ok")
