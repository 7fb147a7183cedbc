#!/usr/bin/env python3
"""Generates the man page and the bash / zsh / fish completions from the command
line's own definition (`trainplan --dump-cli-json`), so they cannot drift from it.

usage: gen_cli_docs.py CLI_JSON OUTDIR
writes OUTDIR/trainplan.1, trainplan-gui.1, trainplan.bash, _trainplan (zsh), trainplan.fish
"""
import json
import os
import re
import sys

PRESET_DIRS = {  # flags whose values are preset names: directory under share/trainplan
    "--gpu": "hardware/gpu", "--node": "hardware/node", "--intra-node": "hardware/link",
    "--inter-node": "hardware/link", "--candidates": "hardware/gpu",
}


def choices(o):
    """Values of an enumerated flag: the schema's enum table where the dump carries it,
    else read from its help ("full | lora | qlora (default full)")."""
    if o.get("choices"):
        return list(o["choices"])
    head = (o.get("description") or "").split(" (")[0].split(": ")[-1]
    words = [w.strip() for w in head.split("|")]
    if len(words) >= 2 and all(re.fullmatch(r"[a-z0-9][a-z0-9.-]*", w) for w in words):
        return words
    return []


def roff(text):
    text = text.replace("\\", "\\\\").replace("-", "\\-")
    return "\\&" + text if text.startswith((".", "'")) else text


def opt_names(o):
    return ["-" + s for s in o["short"]] + ["--" + l for l in o["long"]]


def man(cli, date):
    out = [
        '.TH TRAINPLAN 1 "%s" "trainplan %s" "User Commands"' % (date, cli["version"]),
        ".SH NAME",
        "trainplan \\- " + roff(cli["description"].split(": ", 1)[-1]),
        ".SH SYNOPSIS",
        ".B trainplan",
        ".I COMMAND",
        "[\\fIOPTIONS\\fR]",
        ".br",
        ".B trainplan --version",
        ".SH DESCRIPTION",
        roff("trainplan answers, before any GPU money is spent: will a training or fine-tuning run of a "
             "large language model fit in GPU memory, how fast will it be and where does the time go, "
             "and what hardware should be bought or rented. It is analytic: presets describe models and "
             "hardware, and every command evaluates the scenario in microseconds."),
        ".PP",
        roff("MODEL is a preset name (trainplan models), a size shorthand (13b), a model TOML file, a "
             "Hugging Face config.json, or a Hugging Face id (meta-llama/Llama-2-13b-hf) found in the local "
             "Hugging Face cache or among the shipped presets."),
        ".SH COMMANDS",
    ]
    for sub in cli["subcommands"]:
        pos = [o["positional"] for o in sub["options"] if o["positional"]]
        out += [".SS \\fB%s\\fR%s" % (sub["name"], "".join(" \\fI%s\\fR" % roff(p.upper()) for p in pos)), roff(sub["description"])]
        for o in sub["options"]:
            if o["positional"] or not o["long"] and not o["short"]:
                continue
            names = ", ".join("\\fB%s\\fR" % roff(n) for n in opt_names(o))
            arg = " \\fI%s\\fR" % (o["type"] if o["type"].isalpha() else "VALUE") if o["takes_value"] else ""
            out += [".TP", names + arg, roff(o["description"] or "")]
    out += [
        ".SH EXIT STATUS",
        ".TP", "0", "Success; the scenario fits.",
        ".TP", "1", "It does not fit, no feasible plan, or accuracy beyond the budgets (an answer).",
        ".TP", "2", "Bad input: the message names the file, line, key, value and constraint.",
        ".SH ENVIRONMENT",
        ".TP", "HF_HUB_CACHE, HF_HOME", roff("Where Hugging Face ids are looked up (default ~/.cache/huggingface/hub). trainplan never downloads."),
        ".TP", "XDG_CONFIG_HOME", roff("User presets in $XDG_CONFIG_HOME/trainplan/{models,hardware/gpu,hardware/link,hardware/node} (default ~/.config/trainplan)."),
        ".SH FILES",
        ".TP", "/usr/share/trainplan", roff("Model and hardware presets (each cites its source), the Hugging Face id map and validation data."),
        ".SH EXAMPLES",
        ".nf",
        roff("trainplan fit llama-2-13b --gpu rtx-4090 --method qlora"),
        roff("trainplan fit meta-llama/Llama-2-13b-hf --gpu rtx-4090"),
        roff("trainplan simulate llama-2-7b --gpu a100-sxm-80gb --gpus 8 --json"),
        roff("trainplan plan llama-2-70b --gpu h100-sxm --gpus 64"),
        ".fi",
        ".SH SEE ALSO",
        "\\fBtrainplan-gui\\fR(1)",
    ]
    return "\n".join(out) + "\n"


def man_gui(cli, date):
    return "\n".join([
        '.TH TRAINPLAN-GUI 1 "%s" "trainplan %s" "User Commands"' % (date, cli["version"]),
        ".SH NAME",
        "trainplan-gui \\- desktop front end of trainplan",
        ".SH SYNOPSIS",
        ".B trainplan-gui",
        ".SH DESCRIPTION",
        roff("The whole scenario editable with presets; memory per pipeline stage against capacity; the "
             "step-time breakdown; sweeps; the layout search; side-by-side comparison and report export. "
             "It computes with the same library as trainplan(1)."),
        ".SH SEE ALSO",
        "\\fBtrainplan\\fR(1)",
    ]) + "\n"


def bash(cli):
    subs = [s["name"] for s in cli["subcommands"]]
    top = [n for o in cli["options"] for n in opt_names(o)]
    lines = [
        "# bash completion for trainplan -- generated from `trainplan --dump-cli-json`; do not edit.",
        "_trainplan_presets() {",
        '    local d dirs=("${XDG_CONFIG_HOME:-$HOME/.config}/trainplan/$1")',
        '    local exe; exe=$(command -v trainplan) && dirs+=("$(dirname "$(readlink -f "$exe")")/../share/trainplan/$1")',
        '    for d in "${dirs[@]}"; do [ -d "$d" ] && (cd "$d" && ls -1 -- *.toml 2>/dev/null | sed "s/\\.toml$//"); done',
        "}",
        "_trainplan() {",
        "    local cur prev cmd i",
        '    cur="${COMP_WORDS[COMP_CWORD]}"; prev="${COMP_WORDS[COMP_CWORD-1]}"; cmd=""',
        '    for ((i = 1; i < COMP_CWORD; i++)); do case "${COMP_WORDS[i]}" in -*) ;; *) cmd="${COMP_WORDS[i]}"; break ;; esac; done',
        '    if [ -z "$cmd" ]; then COMPREPLY=($(compgen -W "%s" -- "$cur")); return; fi' % " ".join(subs + top),
        '    case "$prev" in',
    ]
    for flag, d in PRESET_DIRS.items():
        lines.append('        %s) COMPREPLY=($(compgen -W "$(_trainplan_presets %s)" -- "$cur")); return ;;' % (flag, d))
    lines += [
        '        --scenario|--goal|--presets|-o|--output|--case) COMPREPLY=($(compgen -f -- "$cur")); return ;;',
    ]
    enums = {}
    for sub in cli["subcommands"]:
        for o in sub["options"]:
            for n in o["long"]:
                if choices(o):
                    enums.setdefault("--" + n, choices(o))
    for flag, words in enums.items():
        lines.append('        %s) COMPREPLY=($(compgen -W "%s" -- "$cur")); return ;;' % (flag, " ".join(words)))
    lines += ["    esac", '    case "$cmd" in']
    for s in cli["subcommands"]:
        flags = " ".join(n for o in s["options"] for n in opt_names(o))
        model = any(o["positional"] == "model" for o in s["options"])
        extra = ' $(_trainplan_presets models)' if model else ""
        lines.append('        %s) COMPREPLY=($(compgen -W "%s%s" -- "$cur")) ;;' % (s["name"], flags, extra))
    lines += ["    esac", "}", "complete -o default -F _trainplan trainplan", ""]
    return "\n".join(lines)


def zsh_quote(s):
    return s.replace("\\", "\\\\").replace("'", "'\\''").replace("[", "\\[").replace("]", "\\]").replace(":", "\\:")


def zsh(cli):
    lines = [
        "#compdef trainplan",
        "# zsh completion for trainplan -- generated from `trainplan --dump-cli-json`; do not edit.",
        "_trainplan_presets() {",
        "  local -a names dirs; local d",
        '  dirs=("${XDG_CONFIG_HOME:-$HOME/.config}/trainplan/$1" "${${commands[trainplan]:A:h}:h}/share/trainplan/$1")',
        '  for d in $dirs; do [[ -d $d ]] && names+=($d/*.toml(N:t:r)); done',
        "  compadd -a names",
        "}",
        "_trainplan() {",
        "  local -a commands",
        "  commands=(",
    ]
    for s in cli["subcommands"]:
        lines.append("    '%s:%s'" % (s["name"], zsh_quote(s["description"])))
    lines += [
        "  )",
        "  if (( CURRENT == 2 )); then _describe 'command' commands; _arguments '--version[print the version]' '--help[show help]'; return; fi",
        "  local cmd=${words[2]}",
        "  curcontext=\"${curcontext%:*:*}:trainplan-$cmd:\"",
        "  case $cmd in",
    ]
    for s in cli["subcommands"]:
        specs = []
        for o in s["options"]:
            if o["positional"]:
                if o["positional"] == "model":
                    specs.append("'1:model:{_trainplan_presets models; _files}'")
                continue
            desc = zsh_quote(o["description"] or "")
            for n in opt_names(o):
                act = ""
                if o["takes_value"]:
                    if n in PRESET_DIRS:
                        act = ":value:{_trainplan_presets %s}" % PRESET_DIRS[n]
                    elif n in ("--scenario", "--goal", "--presets", "-o", "--output", "--case"):
                        act = ":file:_files"
                    elif choices(o):
                        act = ":value:(%s)" % " ".join(choices(o))
                    else:
                        act = ":value: "
                specs.append("'%s[%s]%s'" % (n, desc, act))
        lines.append("    %s) _arguments %s ;;" % (s["name"], " ".join(specs)))
    lines += ["  esac", "}", '_trainplan "$@"', ""]
    return "\n".join(lines)


def fish_quote(s):
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fish(cli):
    subs = [s["name"] for s in cli["subcommands"]]
    lines = [
        "# fish completion for trainplan -- generated from `trainplan --dump-cli-json`; do not edit.",
        "function __trainplan_presets",
        "    set -l dirs (set -q XDG_CONFIG_HOME; and echo $XDG_CONFIG_HOME; or echo $HOME/.config)/trainplan/$argv[1]",
        "    set -l exe (command -s trainplan); and set -a dirs (path dirname (path dirname (path resolve $exe)))/share/trainplan/$argv[1]",
        "    for d in $dirs; test -d $d; and path change-extension '' (path basename $d/*.toml); end",
        "end",
        "complete -c trainplan -f",
        "complete -c trainplan -n '__fish_use_subcommand' -l version -d 'Print the version'",
    ]
    for s in cli["subcommands"]:
        lines.append("complete -c trainplan -n '__fish_use_subcommand' -a %s -d %s" % (s["name"], fish_quote(s["description"])))
    for s in cli["subcommands"]:
        cond = "'__fish_seen_subcommand_from %s'" % s["name"]
        for o in s["options"]:
            if o["positional"]:
                if o["positional"] == "model":
                    lines.append("complete -c trainplan -n %s -a '(__trainplan_presets models)' -F" % cond)
                continue
            parts = ["complete -c trainplan -n", cond]
            for l in o["long"]:
                parts += ["-l", l]
            for sh in o["short"]:
                parts += ["-s", sh]
            if o["takes_value"]:
                flag = "--" + o["long"][0] if o["long"] else ""
                if flag in PRESET_DIRS:
                    parts += ["-x -a", "'(__trainplan_presets %s)'" % PRESET_DIRS[flag]]
                elif flag in ("--scenario", "--goal", "--presets", "--output", "--case"):
                    parts += ["-r -F"]
                elif choices(o):
                    parts += ["-x -a", fish_quote(" ".join(choices(o)))]
                else:
                    parts += ["-x"]
            if o["description"]:
                parts += ["-d", fish_quote(o["description"])]
            lines.append(" ".join(parts))
    assert subs
    return "\n".join(lines) + "\n"


def main():
    src, outdir = sys.argv[1], sys.argv[2]
    with open(src, encoding="utf-8") as f:
        cli = json.load(f)
    # Reproducible builds: the date from SOURCE_DATE_EPOCH when set.
    import time
    date = time.strftime("%Y-%m-%d", time.gmtime(int(os.environ.get("SOURCE_DATE_EPOCH", time.time()))))
    os.makedirs(outdir, exist_ok=True)
    for name, text in [("trainplan.1", man(cli, date)), ("trainplan-gui.1", man_gui(cli, date)),
                       ("trainplan.bash", bash(cli)), ("_trainplan", zsh(cli)), ("trainplan.fish", fish(cli))]:
        with open(os.path.join(outdir, name), "w", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    main()
