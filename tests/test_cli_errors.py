"""The command line as a newcomer meets it (issue 12): one clear line and exit status 2 for a
user's mistake, a traceback only with --debug, and the messages that were missing."""

import json
import sys
from pathlib import Path

import pytest

from cad_outlines import __version__, compile_grammar
from cad_outlines import cli
from cad_outlines.cli import main
from cad_outlines.errors import CadOutlinesError
from cad_outlines.grammars import available_grammars
from tests.fixture_data import SMALL, require_shared

GPT2 = SMALL / "tokenizers" / "gpt2"


def one_line_error(capsys, code: int, *words: str) -> str:
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, err
    return err


def test_missing_tokenizer_folder_is_named_not_a_hub_error(capsys, tmp_path):
    code = main(["analyze", "json", "--tokenizer", str(tmp_path / "no-such-tokenizer")])
    one_line_error(capsys, code, "no-such-tokenizer", "no such file or folder")


def test_folder_without_a_tokenizer(capsys, tmp_path):
    code = main(["analyze", "json", "--tokenizer", str(tmp_path)])
    one_line_error(capsys, code, "no tokenizer.json, tokenizer.model")


def test_missing_grammar_file_lists_shipped_grammars(capsys):
    code = main(["analyze", "jsn.lark", "--tokenizer", str(GPT2)])
    one_line_error(capsys, code, "'jsn.lark' not found", ", ".join(available_grammars()))


def test_grammar_without_start_rule_names_the_candidates(capsys, tmp_path):
    grammar = tmp_path / "g.lark"
    grammar.write_text('value: "a" | "b"\n')
    code = main(["analyze", str(grammar), "--tokenizer", str(GPT2), "--no-cache"])
    one_line_error(capsys, code, "rule start: the grammar has no rule 'start'", "value", "--start")


def test_debug_shows_the_traceback(tmp_path):
    with pytest.raises(cli.UserError):
        main(["--debug", "analyze", "json", "--tokenizer", str(tmp_path / "nope")])
    with pytest.raises(cli.UserError):
        main(["analyze", "json", "--tokenizer", str(tmp_path / "nope"), "--debug"])


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out.strip() == f"cad-outlines {__version__}"


def test_start_help_says_what_the_default_is(capsys):
    with pytest.raises(SystemExit):
        main(["analyze", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "grammar's first" not in out and "else `start`" in out


def test_study_outside_a_checkout_says_where_studies_run(capsys, monkeypatch, tmp_path):
    """`cad-outlines study roundtrip` answered `invalid choice: 'roundtrip' (choose from )` after a wheel
    install; it now runs `python -m analysis` in the checkout holding the current folder, and there is none."""
    monkeypatch.chdir(tmp_path)
    code = main(["study", "roundtrip"])
    one_line_error(capsys, code, "studies run from a source checkout", "python -m analysis NAME", "pip install -e .",
                   "CAD_OUTLINES_DATA", str(tmp_path))


def test_study_runs_python_m_analysis_in_the_checkout(monkeypatch, tmp_path):
    """The installed package put the checkout on sys.path and imported analysis/; now it runs a subprocess
    with the same interpreter, from the checkout that holds the current folder (here a subfolder of it)."""
    import subprocess
    from types import SimpleNamespace

    repo = cli.find_checkout(Path(__file__).parent)
    assert repo == Path(__file__).resolve().parent.parent
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, cwd: calls.append((cmd, cwd)) or SimpleNamespace(returncode=3))
    monkeypatch.chdir(repo / "tests")
    assert main(["study", "roundtrip", "--jsonl", "x.jsonl", "--debug"]) == 3
    assert calls == [([sys.executable, "-m", "analysis", "roundtrip", "--jsonl", "x.jsonl", "--debug"], repo)]


def test_the_package_never_imports_analysis_or_edits_sys_path():
    """cli.py put the checkout on sys.path to import analysis/ (issue 20)."""
    import ast

    for path in sorted((Path(cli.__file__).parent).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            assert not [n for n in names if n.split(".")[0] in ("analysis", "tests")], (path, node.lineno)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                target = ast.unparse(node.func.value)
                assert not (target == "sys.path" and node.func.attr in ("insert", "append", "extend")), (
                    path, node.lineno)


def test_cli_modules_import_only_downward():
    """cli.py <-> demo.py / edit_cli.py imported each other (UserError, load_tokenizer): the shared
    pieces live in cli_common.py, which imports none of them."""
    import ast

    pkg = Path(cli.__file__).parent

    def imports(name: str) -> set[str]:
        tree = ast.parse((pkg / f"{name}.py").read_text(encoding="utf-8"))
        return {n.module.lstrip(".") for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}

    assert not imports("demo") & {"cli"} and not imports("edit_cli") & {"cli"}
    assert not imports("cli_common") & {"cli", "demo", "edit_cli"}
    assert cli.UserError is __import__("cad_outlines.cli_common", fromlist=["UserError"]).UserError
    assert issubclass(cli.UserError, CadOutlinesError)


def test_demo_unknown_example_lists_the_names(capsys):
    from cad_outlines.examples import load_examples

    code = main(["demo", "--example", "nope", "--no-model"])
    one_line_error(capsys, code, "no example named 'nope'", *[e.name for e in load_examples()])


def test_edit_rejects_a_negative_token_budget(capsys, tmp_path):
    doc = tmp_path / "d.txt"
    doc.write_text("a\n")
    with pytest.raises(SystemExit) as info:
        main(["edit", str(doc), "--instruction", "x", "--model", str(tmp_path), "--max-new-tokens", "-5"])
    assert info.value.code == 2 and "must be at least 1, not -5" in capsys.readouterr().err


def test_edit_missing_file_and_model(capsys, tmp_path):
    code = main(["edit", str(tmp_path / "missing.txt"), "--instruction", "x", "--model", str(tmp_path)])
    one_line_error(capsys, code, "missing.txt", "No such file")
    doc = tmp_path / "d.txt"
    doc.write_text("a\n")
    code = main(["edit", str(doc), "--instruction", "x", "--model", str(tmp_path / "no-model")])
    one_line_error(capsys, code, "no-model", "no such folder")
    code = main(["edit", str(doc), "--instruction", "x", "--model", str(tmp_path)])
    one_line_error(capsys, code, "no config.json")


def test_every_edit_flag_has_help():
    parser = cli._build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices["edit"]
    missing = [a.dest for a in sub._actions if not a.help]
    assert not missing, missing


def test_analyze_with_a_tokenizer_json_file_and_no_indentation_row(capsys, tmp_path, monkeypatch):
    """`--tokenizer .../tokenizer.json` failed in the CLI; the JSON grammar's report showed a
    "NEWLINE indentation ignored" row."""
    monkeypatch.setenv("CAD_OUTLINES_CACHE", str(tmp_path / "cache"))
    code = main(["analyze", "json", "--tokenizer", str(GPT2 / "tokenizer.json"), "--out", str(tmp_path)])
    assert code == 0
    md = (tmp_path / "json.analysis.md").read_text()
    assert "gpt2" in md.splitlines()[0] and "indentation" not in md
    assert json.loads((tmp_path / "json.analysis.json").read_text())["rows_without_indentation"] is None


def test_analyze_without_matplotlib_writes_the_rest_and_says_so(capsys, tmp_path, monkeypatch):
    """`cad-outlines analyze` crashed at its end with ModuleNotFoundError: matplotlib."""
    monkeypatch.setenv("CAD_OUTLINES_CACHE", str(tmp_path / "cache"))
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    code = main(["analyze", "json", "--tokenizer", str(GPT2), "--out", str(tmp_path)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "matplotlib is not installed, so json.analysis.png was not drawn" in captured.err
    assert (tmp_path / "json.analysis.md").exists() and not (tmp_path / "json.analysis.png").exists()
    assert "## Mask-store rows after each step" in captured.out


def test_printing_a_compiled_grammar_is_one_short_line(tmp_path):
    from tests.helpers import ToyVocab

    text = repr(compile_grammar("json", ToyVocab.make(), cache=tmp_path, progress=False))
    assert text.startswith("CompiledGrammar(start='start'") and len(text) < 200 and "\n" not in text


@pytest.mark.shared_data
@pytest.mark.parametrize("which", ["folder", "tokenizer.model"])
def test_llama2_sentencepiece_tokenizer_in_the_cli(which, capsys, tmp_path, monkeypatch):
    """A llama-2 folder asked for tiktoken; its tokenizer.model failed in the CLI."""
    monkeypatch.setenv("CAD_OUTLINES_CACHE", str(tmp_path / "cache"))
    folder = require_shared() / "tokenizers" / "llama2_sentencepiece"
    doc = tmp_path / "d.json"
    doc.write_text('{"a": [1, 2]}')
    path = folder if which == "folder" else folder / "tokenizer.model"
    code = main(["analyze", "json", "--tokenizer", str(path), "--document", str(doc), "--out", str(tmp_path)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "llama2_sentencepiece" in captured.out and "Identical masks at" in captured.out


# --- issue 21: tracebacks where one line and exit 2 were promised ----------------------------------------

@pytest.mark.parametrize("text, words", [
    ('start: A\nA "x"\n', ["g.lark:2:3", "syntax error", "unexpected STRING", "expected one of"]),  # was 70 lines
    ("start: A\nA: /[/\n", ["g.lark", "terminal A", "'['", "unterminated character set"]),  # regex error
    ("// nothing\n", ["g.lark", "the grammar is empty"]),  # said `rules that could start: ;`
])
def test_analyze_on_a_broken_grammar_is_one_line(text, words, capsys, tmp_path):
    grammar = tmp_path / "g.lark"
    grammar.write_text(text)
    code = main(["analyze", str(grammar), "--tokenizer", str(GPT2), "--no-cache", "--out", str(tmp_path)])
    one_line_error(capsys, code, *words)


def test_analyze_with_a_misspelt_grammar_name(capsys, tmp_path):
    code = main(["analyze", "jsno", "--tokenizer", str(GPT2), "--no-cache", "--out", str(tmp_path)])
    one_line_error(capsys, code, "'jsno'", "did you mean 'json'?", ", ".join(available_grammars()))


def test_lark_and_regex_errors_that_escape_the_engine_are_one_line(capsys, monkeypatch, tmp_path):
    """Whatever the engine lets through from lark or the regex module is still one line, naming the grammar."""
    import lark
    import regex

    from cad_outlines import grammar_report

    grammar = tmp_path / "g.lark"
    grammar.write_text('start: A\nA: "a"\n')
    for error in (lark.exceptions.UnexpectedToken(lark.Token("X", "x"), {"COLON"}), regex.error("bad escape")):
        def boom(*args, **kwargs):
            raise error
        monkeypatch.setattr(grammar_report, "analyze_grammar", boom)
        code = main(["analyze", str(grammar), "--tokenizer", str(GPT2), "--out", str(tmp_path)])
        one_line_error(capsys, code, "g.lark")


MODEL = SMALL / "models" / "stories260K_hf"


def test_edit_with_a_tokenizer_that_is_not_the_models(capsys, tmp_path):
    """`edit --tokenizer gpt2` with the 512-token model said `model_vocab_size 512 < tokenizer size 50257` in a
    traceback, after loading the model."""
    doc = tmp_path / "d.txt"
    doc.write_text("a\n")
    code = main(["edit", str(doc), "--instruction", "x", "--model", str(MODEL), "--tokenizer", str(GPT2)])
    one_line_error(capsys, code, "has 50257 tokens", "the model has 512 (its vocab_size)",
                   "does not belong to model", "--tokenizer")


@pytest.mark.parametrize("flag, value, words", [
    ("--temperature", "nan", "must be a finite number >= 0"),  # was RuntimeError: probability tensor contains nan
    ("--temperature", "-1", "must be a finite number >= 0"),  # was accepted
    ("--temperature", "inf", "must be a finite number >= 0"),
    ("--temperature", "warm", "a number expected, not 'warm'"),
    ("--top-p", "0", "must be in (0, 1]"),  # was RuntimeError: probability tensor contains ...
    ("--top-p", "2", "must be in (0, 1]"),  # was accepted
    ("--top-p", "-1", "must be in (0, 1]"),
    ("--seed", "-1", "must be at least 0, not -1"),  # was accepted
    ("--seed", "1.5", "an integer expected, not '1.5'"),
])
def test_edit_refuses_sampling_values_out_of_range(flag, value, words, capsys, tmp_path):
    doc = tmp_path / "d.txt"
    doc.write_text("a\n")
    with pytest.raises(SystemExit) as info:
        main(["edit", str(doc), "--instruction", "x", "--model", str(MODEL), flag, value])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "Traceback" not in err
    assert f"argument {flag}: {words}" in err, err


def test_edit_help_says_what_is_written(capsys):
    """`edit`'s help said the file is "read and written" but only --output was ever written."""
    with pytest.raises(SystemExit):
        main(["edit", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "read and written" not in out
    assert "never changed unless --in-place" in out and "--in-place" in out and "--output" in out


@pytest.mark.parametrize("cut_off", [False, True])
def test_edit_in_place_writes_the_file_only_when_the_program_completed(cut_off, capsys, tmp_path, monkeypatch):
    from cad_outlines.generators.copy_decode import CopyEditor

    before = "Once upon a time.\r\nThe cat liked milk.\r\nThe end.\r\n"
    program = '<copy lines="1-1"/>\n<gen>The cat liked fish.\r\n</gen>\n<copy lines="3-3"/>\n</program>'
    plain_edit = CopyEditor.edit
    monkeypatch.setattr(CopyEditor, "edit", lambda self, document, instruction, **kw: plain_edit(
        self, document, instruction, script=program, max_new_tokens=5 if cut_off else 10**6))
    doc = tmp_path / "story.txt"
    doc.write_bytes(before.encode())
    code = main(["edit", str(doc), "--instruction", "fish", "--model", str(MODEL), "--in-place"])
    err = capsys.readouterr().err
    if cut_off:
        assert code == 1 and "not writing --in-place: the program is incomplete" in err
        assert doc.read_bytes() == before.encode()
    else:
        assert code == 0, err
        assert doc.read_bytes() == before.replace("milk", "fish").encode() and f"wrote {doc}" in err
    with pytest.raises(SystemExit) as info:  # one place to write, not two
        main(["edit", str(doc), "--instruction", "x", "--model", str(MODEL), "--in-place", "--output", "o.txt"])
    assert info.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


@pytest.mark.parametrize("which", ["missing", "folder", "not-json"])
def test_demo_with_a_bad_tokenizer_is_one_line(which, capsys, tmp_path):
    """`demo --tokenizer /nonexistent --no-model` raised `Exception: No such file or directory`."""
    path = {"missing": tmp_path / "nonexistent", "folder": tmp_path, "not-json": tmp_path / "tokenizer.json"}[which]
    if which == "not-json":
        path.write_text("not json")
    code = main(["demo", "--tokenizer", str(path), "--no-model"])
    words = {"missing": ["nonexistent", "no such file or folder"], "folder": ["no tokenizer.json in that folder"],
             "not-json": ["tokenizer.json", "not a tokenizer.json the tokenizers library can read"]}[which]
    one_line_error(capsys, code, *words)


def test_edit_with_a_tokenizer_far_smaller_than_the_models_vocabulary(capsys, tmp_path):
    """Issue 29: another model's (smaller) tokenizer ran without a word and wrote `<program></program>`; with
    --in-place that emptied the file. Refused before the model loads (only config.json is read)."""
    model = tmp_path / "model"
    model.mkdir()
    config = json.loads((MODEL / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "vocab_size": 50257}))
    doc = tmp_path / "d.txt"
    doc.write_text("a\n")
    code = main(["edit", str(doc), "--instruction", "x", "--model", str(model), "--tokenizer", str(MODEL),
                 "--in-place"])
    one_line_error(capsys, code, "does not belong to model", "512 tokens", "50257", "far more than padding",
                   "--tokenizer")
    assert doc.read_text() == "a\n"


def test_edit_of_a_file_that_is_not_utf8_names_the_file(capsys, tmp_path):
    doc = tmp_path / "latin1.txt"
    doc.write_bytes("caf\xe9\n".encode("latin-1"))
    code = main(["edit", str(doc), "--instruction", "x", "--model", str(MODEL)])
    one_line_error(capsys, code, "latin1.txt", "is not UTF-8 text", "0xe9", "offset 3")


@pytest.mark.parametrize("where", ["--in-place", "--output"])
def test_edit_never_writes_a_program_that_deletes_every_line(where, capsys, tmp_path, monkeypatch):
    """An empty program is a complete edit that deletes the document: not written without --allow-delete-all."""
    from cad_outlines.generators.copy_decode import CopyEditor

    edit = CopyEditor.edit  # the model writes the empty program (teacher-forced)
    monkeypatch.setattr(CopyEditor, "edit", lambda self, document, instruction, **kw: edit(
        self, document, instruction, **{**kw, "script": "</program>"}))
    doc, out = tmp_path / "d.txt", tmp_path / "new.txt"
    doc.write_text("a\nb\n")
    args = ["edit", str(doc), "--instruction", "x", "--model", str(MODEL)]
    args += ["--in-place"] if where == "--in-place" else ["--output", str(out)]
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2 and "deletes every line of the document (2 lines)" in err and "--allow-delete-all" in err, err
    assert doc.read_text() == "a\nb\n" and not out.exists()
    assert main(args + ["--allow-delete-all"]) == 0
    assert (doc if where == "--in-place" else out).read_text() == ""


def test_edit_format_switch_writes_a_search_replace_edit_and_refuses_unknown_formats(capsys, tmp_path, monkeypatch):
    from cad_outlines.generators.copy_decode import CopyEditor

    before = "Once upon a time.\nThe cat liked milk.\nThe end.\n"
    program = "<<<<<<< SEARCH\nThe cat liked milk.\n=======\nThe cat liked fish.\n>>>>>>> REPLACE\n"
    seen = {}
    plain_edit = CopyEditor.edit

    def scripted(self, document, instruction, **kw):
        seen.update(kw, editor_format=self.format)
        return plain_edit(self, document, instruction, script=program, max_new_tokens=10**6,
                          name=kw["name"])

    monkeypatch.setattr(CopyEditor, "edit", scripted)
    doc = tmp_path / "story.txt"
    doc.write_text(before)
    out = tmp_path / "new.txt"
    code = main(["edit", str(doc), "--instruction", "fish", "--model", str(MODEL), "--format", "search_replace",
                 "--output", str(out)])
    printed = capsys.readouterr()
    assert code == 0 and out.read_text() == before.replace("milk", "fish")
    assert seen["editor_format"] == "search_replace" and seen["name"] == "story.txt"
    assert program in printed.out and "+The cat liked fish." in printed.out
    with pytest.raises(SystemExit) as info:
        main(["edit", str(doc), "--instruction", "x", "--model", str(MODEL), "--format", "diff"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "invalid choice: 'diff'" in err and "search_replace" in err
    code = main(["edit", str(doc), "--instruction", "x", "--model", str(MODEL), "--format", "udiff",
                 "--speculative", "2"])
    one_line_error(capsys, code, "--speculative drafts go in the copy format's gen bodies")
