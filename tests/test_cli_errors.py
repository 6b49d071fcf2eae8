"""The command line as a newcomer meets it (issue 12): one clear line and exit status 2 for a
user's mistake, a traceback only with --debug, and the messages that were missing."""

import json
import sys

import pytest

from cad_outlines import __version__, compile_grammar
from cad_outlines import cli
from cad_outlines.cli import main
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
    one_line_error(capsys, code, "'jsn.lark' not found", "copy_edit, json, python, sql")


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


def test_study_after_a_wheel_install_says_where_studies_run(capsys, monkeypatch):
    """`cad-outlines study roundtrip` answered `invalid choice: 'roundtrip' (choose from )`."""
    monkeypatch.setattr(cli, "_studies", lambda: {})
    code = main(["study", "roundtrip"])
    one_line_error(capsys, code, "studies run from a source checkout", "pip install -e .", "CAD_OUTLINES_DATA")


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
    from tests.test_engine import ToyVocab

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
