#!/usr/bin/env python3
"""Writers against labels of every class of code point (ROBUSTNESS.md).

Usage: labels_readback.py KNNWB_PROGRAM WORK_DIR

A CSV whose row labels hold quotes, markup, tabs, line breaks, CR, C0 and C1 controls, DEL,
U+FFFE/U+FFFF, BMP and astral characters and a 20,000-character label (invalid UTF-8 is refused
by the readers) is turned
into GraphML and GML by `knnwb knn`. The GraphML must parse with a strict XML 1.0 parser
(expat through xml.etree, and xmllint when present) and give every label back, with exactly the
code points XML 1.0 cannot hold replaced by U+FFFD; the GML must parse with networkx and
python-igraph and give the printable labels back. Exit 77 (skipped) without networkx/igraph.
"""
import os
import shutil
import subprocess
import sys
import warnings
import xml.etree.ElementTree as ET

try:
    import networkx
    import igraph
except ImportError as error:
    print(f"skipped: {error}")
    sys.exit(77)

program, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)

# (label as bytes in the CSV, the label knnwb reads, whether GML readers must give it back as is)
LABELS = [
    (b"plain", "plain", True),
    (b'quote"inside', 'quote"inside', True),
    (b"amp&lt<gt>'apos", "amp&lt<gt>'apos", True),
    (b"<!-- ]]> -->", "<!-- ]]> -->", True),
    (b"tab\there", "tab\there", True),
    (b"line\nbreak", "line\nbreak", True),
    (b"cr\rhere", "cr\rhere", False),
    (b"c0 \x01\x02\x1b\x1f", "c0 \x01\x02\x1b\x1f", False),
    (b"del c1 \x7f\xc2\x80\xc2\x9f", "del c1 \x7f\u0080\u009f", False),
    (b"nonchar \xef\xbf\xbe\xef\xbf\xbf", "nonchar \ufffe\uffff", False),
    (b"bmp \xc3\xa9\xe4\xb8\xad \xef\xbf\xbd \xee\x80\x80", "bmp \u00e9\u4e2d \ufffd \ue000", True),
    (b"astral \xf0\x9f\x98\x80", "astral \U0001F600", True),
    (b"long " + b"x" * 20000, "long " + "x" * 20000, True),
]


def quoted(field: bytes) -> bytes:
    return b'"' + field.replace(b'"', b'""') + b'"'


def xml_expected(label: str) -> str:
    def allowed(c):
        o = ord(c)
        return (o in (0x9, 0xA, 0xD) or 0x20 <= o <= 0xD7FF or 0xE000 <= o <= 0xFFFD
                or 0x10000 <= o <= 0x10FFFF)
    return "".join(c if allowed(c) else "\ufffd" for c in label)


csv = bytearray(b"label,a,b,c\n")
for i, (raw, _, _) in enumerate(LABELS):
    csv += quoted(raw) + f",{i},{i * i % 7},{(i * 3) % 5}\n".encode()
csv_path = os.path.join(work, "labels.csv")
with open(csv_path, "wb") as f:
    f.write(csv)

failures = []
outputs = {}
for extension in ("graphml", "gml"):
    out = os.path.join(work, "labels." + extension)
    result = subprocess.run([program, "knn", csv_path, "-k", "2", "--metric", "euclidean",
                             "-q", "-o", out], capture_output=True)
    if result.returncode != 0:
        print(result.stderr.decode(errors="replace"))
        sys.exit(f"knnwb knn -o {out} failed with {result.returncode}")
    outputs[extension] = out

# GraphML: strict XML 1.0.
try:
    root = ET.parse(outputs["graphml"]).getroot()
except ET.ParseError as error:
    sys.exit(f"GraphML is not well-formed XML: {error}")
if shutil.which("xmllint"):
    lint = subprocess.run(["xmllint", "--noout", outputs["graphml"]], capture_output=True)
    if lint.returncode != 0:
        failures.append("xmllint: " + lint.stderr.decode(errors="replace")[:500])
ns = {"g": "http://graphml.graphdrawing.org/xmlns"}
keys = {k.get("id"): k.get("attr.name") for k in root.iter("{%s}key" % ns["g"])}
label_key = next(k for k, name in keys.items() if name == "label")
got = []
for node in root.iter("{%s}node" % ns["g"]):
    for data in node.findall("g:data", ns):
        if data.get("key") == label_key:
            got.append(data.text or "")
if len(got) != len(LABELS):
    failures.append(f"GraphML: {len(got)} labels for {len(LABELS)} rows")
for (raw, label, _), text in zip(LABELS, got):
    if text != xml_expected(label):
        failures.append(f"GraphML label {text[:80]!r}, expected {xml_expected(label)[:80]!r}")

# GML: networkx (HTML entity rules) and python-igraph.
try:
    graph = networkx.read_gml(outputs["gml"], label="id")
    nx_labels = [graph.nodes[v].get("label") for v in sorted(graph.nodes)]
except Exception as error:  # noqa: BLE001 - any exception is a failure
    failures.append(f"networkx cannot read the GML: {error}")
    nx_labels = []
try:
    with warnings.catch_warnings():
        # igraph skips yEd's nested graphics blocks and keeps numeric entities (&#9;) verbatim.
        warnings.simplefilter("ignore", RuntimeWarning)
        ig = igraph.Graph.Read_GML(outputs["gml"])
    ig_labels = ig.vs["label"]
except Exception as error:  # noqa: BLE001
    failures.append(f"python-igraph cannot read the GML: {error}")
    ig_labels = []
if nx_labels and len(nx_labels) != len(LABELS):
    failures.append(f"networkx: {len(nx_labels)} nodes for {len(LABELS)} rows")
if ig_labels and len(ig_labels) != len(LABELS):
    failures.append(f"igraph: {len(ig_labels)} nodes for {len(LABELS)} rows")
for (raw, label, printable), nx_label in zip(LABELS, nx_labels):
    if printable and nx_label != label:
        failures.append(f"networkx label {nx_label[:80]!r}, expected {label[:80]!r}")
for (raw, label, printable), ig_label in zip(LABELS, ig_labels):
    if printable and label.isascii() and '"' not in label and "&" not in label \
            and "\t" not in label and "\n" not in label and ig_label != label:
        failures.append(f"igraph label {ig_label[:80]!r}, expected {label[:80]!r}")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print(f"{len(LABELS)} labels: GraphML well-formed and exact, GML read by networkx and igraph")
