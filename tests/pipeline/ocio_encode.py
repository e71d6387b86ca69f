#!/usr/bin/python3
"""Scene-linear Rec.709 RGB to another colour space with OpenColorIO's own Python bindings
(Debian python3-pyopencolorio; run by the system python, which has them), so that test
plates are made by OCIO itself and not by the engine under test.

  ocio_encode.py logc3|ap0|ap1 < "r g b" lines > lines
"""
import sys

import PyOpenColorIO as ocio

target = sys.argv[1]
group = ocio.GroupTransform()
to_ap1 = ocio.BuiltinTransform()
to_ap1.setStyle("UTILITY - ACES-AP1_to_LINEAR-REC709_BFD")
to_ap1.setDirection(ocio.TRANSFORM_DIR_INVERSE)
group.appendTransform(to_ap1)
if target in ("logc3", "ap0"):
    ap1_ap0 = ocio.BuiltinTransform()
    ap1_ap0.setStyle("ACEScg_to_ACES2065-1")
    group.appendTransform(ap1_ap0)
if target == "logc3":
    logc = ocio.BuiltinTransform()
    logc.setStyle("ARRI_ALEXA-LOGC-EI800-AWG_to_ACES2065-1")
    logc.setDirection(ocio.TRANSFORM_DIR_INVERSE)
    group.appendTransform(logc)
# LOSSLESS: no fast log/exp approximations in the reference values.
cpu = ocio.Config.CreateRaw().getProcessor(group).getOptimizedCPUProcessor(ocio.OPTIMIZATION_LOSSLESS)
values = [float(x) for x in sys.stdin.read().split()]
out = cpu.applyRGB(values)
sys.stdout.write("\n".join(" ".join(repr(v) for v in out[i:i + 3]) for i in range(0, len(out), 3)))
