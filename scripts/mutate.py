#!/usr/bin/python3
"""Mutation campaign: mutants of every shipped preset, the test scenarios and the
test config.json files, each run through the trainplan binary.

Every run must end with exit 0 or 1 and finite JSON on stdout, or exit 2 with
every error line naming where it comes from (a file, or a flag); never a signal,
a sanitizer report, another exit code, or more than --timeout seconds.

Deterministic: mutant i of file F comes from random.Random(f"{seed}:{F}:{i}").
A failing mutant is kept under --keep (default build-asan/mutants-failed/) with
the command that failed.

  scripts/mutate.py --trainplan build-asan/cli/trainplan              # test.sh's sample
  scripts/mutate.py --trainplan build/cli/trainplan --per-file 500    # the full campaign
Standard library only (Debian's /usr/bin/python3).
"""

import argparse
import concurrent.futures
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Values a careless or hostile writer puts where a number was.
NUMBERS = ["0", "-1", "-0", "1e308", "-1e308", "1e-308", "nan", "inf", "-inf", "+inf", "9223372036854775807",
           "-9223372036854775808", "18446744073709551616", "0.5", "1e9", "3", "65536", "0x7fffffff", "1_000_000",
           "1e999", "2.5e-7", "true", "\"12\"", "[]", "{}"]
STRINGS = ["", "\\u001b[2J", "\\u0000", "x" * 5000, "../../etc/passwd", "h100-sxm", "rtx-4090", "llama-2-7b",
           "nvlink4", "ib-ndr", "none", "full", "qlora", "fp8-mixed", "\\u00e9\\u20ac", "a\\nb"]
JSON_VALUES = ["0", "-1", "1e308", "-1e308", "1e999", "null", "true", "\"\"", "\"llama\"", "[]", "{}", "[1,2]",
               "{\"a\":1}", "18446744073709551616", "0.5", "\"\\u001b[2J\""]
NUM_RE = re.compile(r"(?<![\w.\-])[-+]?\d[\d_]*(\.\d+)?([eE][-+]?\d+)?(?![\w.])")
STR_RE = re.compile(r'"(?:[^"\\\n]|\\.)*"')
KEY_RE = re.compile(r"^([A-Za-z0-9_\-]+)\s*=", re.M)


def mutate_text(text, rng, corpus, is_json):
    """One to three random edits of `text`."""
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        op = rng.randrange(14)
        lines = text.split("\n")
        if op == 0 and text:  # flip a byte
            i = rng.randrange(len(text))
            text = text[:i] + chr(rng.randrange(1, 128)) + text[i + 1:]
        elif op == 1 and text:  # delete a span
            i = rng.randrange(len(text))
            text = text[:i] + text[i + rng.randrange(1, 40):]
        elif op == 2 and text:  # truncate
            text = text[:rng.randrange(len(text))]
        elif op == 3:  # replace a number
            m = list(NUM_RE.finditer(text))
            if m:
                x = rng.choice(m)
                v = rng.choice(JSON_VALUES if is_json else NUMBERS)
                text = text[:x.start()] + v + text[x.end():]
        elif op == 4:  # replace a string
            m = list(STR_RE.finditer(text))
            if m:
                x = rng.choice(m)
                v = rng.choice(JSON_VALUES) if is_json and rng.random() < 0.5 else '"' + rng.choice(STRINGS) + '"'
                text = text[:x.start()] + v + text[x.end():]
        elif op == 5 and len(lines) > 1:  # delete a line
            del lines[rng.randrange(len(lines))]
            text = "\n".join(lines)
        elif op == 6:  # duplicate a line
            i = rng.randrange(len(lines))
            lines.insert(i, lines[i])
            text = "\n".join(lines)
        elif op == 7 and len(lines) > 1:  # swap two lines
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines)
        elif op == 8:  # a line from another input
            other = rng.choice(corpus).split("\n")
            lines.insert(rng.randrange(len(lines) + 1), rng.choice(other))
            text = "\n".join(lines)
        elif op == 9:  # misspell a key
            m = list(KEY_RE.finditer(text)) if not is_json else list(re.finditer(r'"([a-z_]+)"\s*:', text))
            if m:
                x = rng.choice(m)
                k = x.group(1)
                i = rng.randrange(len(k))
                text = text[:x.start(1)] + k[:i] + k[i + 1:] + text[x.end(1):]
        elif op == 10:  # deep nesting
            depth = rng.choice([10, 63, 64, 65, 200, 5000, 40000])
            if is_json:
                text = "[" * depth + text + "]" * depth if rng.random() < 0.5 else '{"a":' * depth + "1" + "}" * depth
            elif rng.random() < 0.5:
                text = "[" + ".".join(["a"] * depth) + "]\n" + text
            else:
                text = text + "\nx = " + "[" * depth + "]" * depth + "\n"
        elif op == 11:  # control characters and odd bytes
            i = rng.randrange(len(text) + 1)
            text = text[:i] + rng.choice(["\x1b[31m", "\x00", "\x07", "\r", "\t", "\x7f", "\u009b", "\ufeff", "\u202e"]) + text[i:]
        elif op == 12:  # a table header or bracket where it does not belong
            i = rng.randrange(len(lines) + 1)
            lines.insert(i, rng.choice(["[model]", "[hardware]", "[[case]]", "[moe]", "[", "]", "{", "}", "a.b.c = 1", "= 1", "\"\" = 1"]))
            text = "\n".join(lines)
        else:  # swap a value's type
            m = list(NUM_RE.finditer(text)) + list(STR_RE.finditer(text))
            if m:
                x = rng.choice(m)
                v = rng.choice(["true", "[1, 2]", "{a = 1}", "\"3\"", "2024-01-01"] if not is_json else JSON_VALUES)
                text = text[:x.start()] + v + text[x.end():]
    return text


def inputs():
    """(kind, relative path) of every input mutated."""
    out = []
    for kind, folder in [("model", "models"), ("gpu", "hardware/gpu"), ("link", "hardware/link"), ("node", "hardware/node")]:
        for f in sorted(os.listdir(os.path.join(ROOT, folder))):
            if f.endswith(".toml"):
                out.append((kind, f"{folder}/{f}"))
    for f in sorted(os.listdir(os.path.join(ROOT, "tests/data/scenarios"))):
        if f.endswith(".toml"):
            out.append(("scenario", f"tests/data/scenarios/{f}"))
    for f in sorted(os.listdir(os.path.join(ROOT, "tests/data/hf"))):
        if f.endswith(".json"):
            out.append(("config", f"tests/data/hf/{f}"))
    return out


def command(trainplan, kind, work, rel):
    """Writes the mutant's place in `work` and returns (path to write, argv)."""
    presets = os.path.join(work, "presets")
    if kind == "model":
        path = os.path.join(work, "mutant.toml")
        return path, [trainplan, "simulate", path, "--gpu", "h100-sxm", "--gpus", "8", "--seq-len", "1024", "--json"]
    if kind == "config":
        path = os.path.join(work, "config.json")
        return path, [trainplan, "simulate", path, "--gpu", "h100-sxm", "--gpus", "8", "--seq-len", "1024", "--json"]
    if kind == "scenario":
        path = os.path.join(work, "scenario.toml")
        if rel.endswith("goal-llama3-8b.toml"):
            return path, [trainplan, "size", "--goal", path, "--candidates", "h100-sxm", "--format", "json"]
        return path, [trainplan, "simulate", "--scenario", path, "--json"]
    sub = {"gpu": "hardware/gpu", "link": "hardware/link", "node": "hardware/node"}[kind]
    path = os.path.join(presets, sub, "mutant.toml")
    if kind == "gpu":
        args = ["llama-2-7b", "--gpu", "mutant", "--gpus", "16"]
    elif kind == "link":
        args = ["llama-2-7b", "--gpu", "h100-sxm", "--gpus", "16", "--intra-node", "mutant", "--inter-node", "mutant", "--tp", "2"]
    else:
        args = ["llama-2-7b", "--node", "mutant", "--gpus", "16"]
    return path, [trainplan, "simulate", *args, "--presets", presets, "--json"]


def all_finite(v, path="$"):
    """The first non-finite number (or null standing for one) in a JSON value, else None."""
    if isinstance(v, float) and not math.isfinite(v):
        return path
    if isinstance(v, dict):
        for k, x in v.items():
            if x is None and k not in NULLABLE:
                return f"{path}.{k} = null"
            bad = all_finite(x, f"{path}.{k}")
            if bad:
                return bad
    if isinstance(v, list):
        for i, x in enumerate(v):
            bad = all_finite(x, f"{path}[{i}]")
            if bad:
                return bad
    return None


# Keys whose null means "none" rather than a NaN that nlohmann printed as null.
NULLABLE = {"recommended", "recommended_mode", "shadows", "host_capacity_bytes"}  # host_capacity_bytes: node RAM not given
ERROR_LINE = re.compile(r"error:")
LOCATED = re.compile(r"^(\S[^:]*:(\d+:)?(\d+:)? error: |error: .*--[a-z])")


def judge(proc, elapsed, timeout, files):
    """'' when the run is acceptable, else what is wrong."""
    if proc is None:
        return f"timeout (> {timeout} s)"
    err = proc.stderr.decode("utf-8", "replace")
    if proc.returncode < 0:
        return f"killed by signal {-proc.returncode}"
    if "Sanitizer" in err or "runtime error:" in err:
        return "sanitizer report"
    if proc.returncode in (0, 1):
        try:
            def no_constants(c):
                raise ValueError(f"non-finite {c}")
            out = json.loads(proc.stdout.decode("utf-8"), parse_constant=no_constants)
        except ValueError as e:
            return f"exit {proc.returncode} without valid JSON: {e}"
        bad = all_finite(out)
        return f"non-finite number at {bad}" if bad else ""
    if proc.returncode == 2:
        lines = [l for l in err.splitlines() if ERROR_LINE.search(l)]
        if not lines:
            return "exit 2 without an error message"
        for l in lines:
            if not LOCATED.match(l):
                return f"error without a location: {l[:200]}"
        return ""
    return f"exit {proc.returncode}: {err[-300:]}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trainplan", default=os.path.join(ROOT, "build-asan/cli/trainplan"))
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--per-file", type=int, default=500, help="mutants of each input (default 500)")
    ap.add_argument("--per-preset", type=int, default=None, help="mutants of each preset if fewer (default --per-file)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--keep", default=os.path.join(ROOT, "build-asan/mutants-failed"))
    a = ap.parse_args()
    if not os.access(a.trainplan, os.X_OK):
        sys.exit(f"mutate.py: {a.trainplan}: no such program (build it first)")

    files = inputs()
    texts = {rel: open(os.path.join(ROOT, rel), encoding="utf-8").read() for _, rel in files}
    corpus = list(texts.values())
    jobs = []
    for kind, rel in files:
        n = a.per_file if kind in ("scenario", "config") or a.per_preset is None else a.per_preset
        for i in range(n):
            jobs.append((kind, rel, i))

    env = dict(os.environ)
    env.update({"XDG_CONFIG_HOME": "/nonexistent-trainplan-mutate", "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0",
                "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"})
    base = tempfile.mkdtemp(prefix="trainplan-mutate-")
    counts = {"runs": 0, "ok0": 0, "ok1": 0, "ok2": 0}
    failures = []
    slowest = 0.0

    def run_one(numbered):
        n, job = numbered
        kind, rel, i = job
        rng = random.Random(f"{a.seed}:{rel}:{i}")
        text = mutate_text(texts[rel], rng, corpus, rel.endswith(".json"))
        work = os.path.join(base, f"job{n}")
        path, argv = command(a.trainplan, kind, work, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(text)
        t0 = time.monotonic()
        try:
            proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=a.timeout, env=env)
        except subprocess.TimeoutExpired:
            proc = None
        elapsed = time.monotonic() - t0
        why = judge(proc, elapsed, a.timeout, [path])
        if why:
            os.makedirs(a.keep, exist_ok=True)
            keep = os.path.join(a.keep, f"{kind}-{os.path.basename(rel)}-{i}{os.path.splitext(path)[1]}")
            shutil.copyfile(path, keep)
            with open(keep + ".cmd", "w") as f:
                f.write(" ".join(argv) + "\n" + why + "\n" + (proc.stderr.decode("utf-8", "replace") if proc else "") + "\n")
        shutil.rmtree(work, ignore_errors=True)
        return job, why, proc.returncode if proc else None, elapsed

    t_start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        for (kind, rel, i), why, rc, elapsed in pool.map(run_one, enumerate(jobs)):
            counts["runs"] += 1
            slowest = max(slowest, elapsed)
            if why:
                failures.append(f"{rel} mutant {i}: {why}")
            elif rc in (0, 1, 2):
                counts[f"ok{rc}"] += 1
    shutil.rmtree(base, ignore_errors=True)
    kinds = {}
    for kind, _ in files:
        kinds[kind] = kinds.get(kind, 0) + 1
    print(f"mutate: {counts['runs']} runs of {len(files)} inputs ({', '.join(f'{v} {k}' for k, v in kinds.items())}), seed {a.seed}, "
          f"{time.monotonic() - t_start:.0f} s, slowest {slowest:.2f} s")
    print(f"mutate: exit 0: {counts['ok0']}, exit 1: {counts['ok1']}, exit 2 with a location: {counts['ok2']}, failures: {len(failures)}")
    for f in failures[:40]:
        print("  FAIL " + f)
    if failures:
        print(f"mutate: failing mutants kept in {a.keep}/")
        sys.exit(1)


if __name__ == "__main__":
    main()
