#!/usr/bin/env python3
"""`knnwb render`: the demo data clustered and drawn, a hand-made GML with a focus node, SVG and
PDF, and bad inputs. PNGs are decoded here (zlib + PNG filters, standard library only) to check
their size and content: many distinct cluster colours, the focus's red, nothing but white where
the drawing is empty.

usage: test_render.py KNNWB_PROGRAM SOURCE_DIR WORK_DIR
"""
import os
import struct
import subprocess
import sys
import zlib

program, source, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


def read_png(path):
    """(width, height, list of rows of (r, g, b)) for 8-bit RGB/RGBA PNGs."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6), (depth, colour)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        line = raw[y * (stride + 1):(y + 1) * (stride + 1)]
        kind, row = line[0], bytearray(line[1:])
        for i in range(stride):
            a = row[i - channels] if i >= channels else 0
            b = previous[i]
            c = previous[i - channels] if i >= channels else 0
            if kind == 1:
                row[i] = (row[i] + a) & 255
            elif kind == 2:
                row[i] = (row[i] + b) & 255
            elif kind == 3:
                row[i] = (row[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(row[x * channels:x * channels + 3]) for x in range(width)])
        previous = row
    return width, height, rows


def run(*args, expect=0):
    result = subprocess.run([program, *args], capture_output=True, text=True)
    check(result.returncode == expect,
          f"knnwb {' '.join(args)}: exit {result.returncode}, want {expect}: {result.stderr}")
    return result


# The demo data clustered by Leiden, laid out by FR (auto), drawn 400 pixels wide.
expression = os.path.join(source, "share/examples/data/synthetic_expression.tsv")
gml = os.path.join(work, "demo.gml")
run("cluster", expression, "--method", "leiden", "-k", "10", "-q", "-o",
    os.path.join(work, "demo.tsv"), "--gml", gml)
png = os.path.join(work, "demo.png")
run("render", gml, "-o", png, "--width", "400", "-q")
width, height, rows = read_png(png)
check(width == 400 and 100 <= height <= 400, f"demo.png is {width} x {height}")
counts = {}
for row in rows:
    for pixel in row:
        counts[pixel] = counts.get(pixel, 0) + 1
white = counts.get((255, 255, 255), 0)
check(0.3 * width * height < white < 0.98 * width * height, f"demo.png: {white} white pixels")
# Saturated colours (not grey) drawn on at least 15 pixels each: the clusters' palette.
coloured = [p for p, c in counts.items() if c >= 15 and max(p) - min(p) > 60]
check(len(coloured) >= 8, f"demo.png: only {len(coloured)} distinct cluster colours")
check(all(p == (255, 255, 255) for p in rows[0] + rows[-1]), "demo.png: margins are not white")

# A hand-made GML: two nodes and a focus; the focus is drawn red on top.
small = os.path.join(work, "small.gml")
with open(small, "w") as f:
    f.write('graph [ directed 0\n'
            ' node [ id 0 label "a" graphics [ x -100.0 y 0.0 w 30.0 h 30.0 fill "#1F77B4" ] ]\n'
            ' node [ id 1 label "b" graphics [ x 100.0 y 50.0 w 30.0 h 30.0 fill "#2CA02C" ] ]\n'
            ' node [ id 2 label "probe" focus 1 graphics [ x 0.0 y 100.0 w 60.0 h 60.0\n'
            '   type "hexagon" fill "#FF0000" ] ]\n'
            ' edge [ source 0 target 1 graphics [ fill "#A0A0A0" width 2.0 ] ]\n'
            ' edge [ source 1 target 2 ]\n]\n')
run("render", small, "-o", os.path.join(work, "small.png"), "--width", "300", "-q")
width, height, rows = read_png(os.path.join(work, "small.png"))
pixels = [p for row in rows for p in row]
check(pixels.count((255, 0, 0)) > 50, f"small.png: {pixels.count((255, 0, 0))} focus-red pixels")
check(pixels.count((0x1F, 0x77, 0xB4)) > 50, "small.png: node a's colour missing")

# SVG and PDF.
run("render", small, "-o", os.path.join(work, "small.svg"), "-q")
with open(os.path.join(work, "small.svg"), "rb") as f:
    check(b"<svg" in f.read(400), "small.svg is not SVG")
run("render", small, "-o", os.path.join(work, "small.pdf"), "-q")
with open(os.path.join(work, "small.pdf"), "rb") as f:
    check(f.read(5) == b"%PDF-", "small.pdf is not PDF")

# Colours by a node attribute: an unknown one is refused naming those the GML has (exit 1, no
# picture); a string attribute gets a palette, the legend its swatches; --title "" and --density.
tagged = os.path.join(work, "tagged.gml")
with open(tagged, "w") as f:
    f.write('graph [ directed 1\n'
            ' node [ id 0 label "a" lineage "B" graphics [ x 0.0 y 0.0 ] ]\n'
            ' node [ id 1 label "b" lineage "T" graphics [ x 200.0 y 0.0 ] ]\n'
            ' node [ id 2 label "c" lineage "B" graphics [ x 100.0 y 150.0 ] ]\n'
            ' edge [ source 0 target 1 ]\n]\n')
missing = os.path.join(work, "missing.png")
result = run("render", tagged, "-o", missing, "--color-by", "age", expect=1)
check("no node attribute" in result.stderr and "lineage" in result.stderr, result.stderr)
check(not os.path.exists(missing), "missing.png written")
coloured_png = os.path.join(work, "lineage.png")
run("render", tagged, "-o", coloured_png, "--color-by", "lineage", "--title", "", "-q")
width, height, rows = read_png(coloured_png)
pixels = [p for row in rows for p in row]
check(pixels.count((0x1F, 0x77, 0xB4)) > 60 and pixels.count((0xFF, 0x7F, 0x0E)) > 30,
      "lineage.png: the palette's first two colours missing")
check(all(p == (255, 255, 255) for p in rows[0] + rows[-1]), "lineage.png: margins are not white")
run("render", tagged, "-o", os.path.join(work, "dense.png"), "--density", "-q")

# Bad inputs: no coordinates (exit 1, names the fix), a broken file (file:line), a bad
# extension (usage, exit 2), a device (exit 1, not a regular file); nothing written.
bare = os.path.join(work, "bare.gml")
with open(bare, "w") as f:
    f.write("graph [ node [ id 0 ] ]\n")
out = os.path.join(work, "bad.png")
result = run("render", bare, "-o", out, expect=1)
check("no coordinates" in result.stderr and "--layout" in result.stderr, result.stderr)
broken = os.path.join(work, "broken.gml")
with open(broken, "w") as f:
    f.write('graph [\n node [ id 0 label "x ]\n')
result = run("render", broken, "-o", out, expect=1)
check(f"{broken}:" in result.stderr, f"broken: {result.stderr}")
result = run("render", small, "-o", os.path.join(work, "x.jpg"), expect=2)
result = run("render", "/dev/zero", "-o", out, expect=1)
check("not a regular file" in result.stderr, f"/dev/zero: {result.stderr}")
check(not os.path.exists(out), "bad.png written")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("ok: render PNG/SVG/PDF")
