"""Long work shows progress (issue 12, item 11): the analysis steps after the mask store are
no longer silent, and the mask-store bar no longer shows a total that grows as it runs."""

from cad_outlines.engine import compile as compile_module
from cad_outlines.grammar_report import analyze_grammar
from tests.helpers import ToyVocab


def test_mask_store_bar_has_no_growing_total(monkeypatch):
    """The bar's total grew from 389 to 1,543 as configurations were found, so its ETA jumped."""
    import tqdm.auto

    totals = []

    class Recorder(tqdm.auto.tqdm):
        def __setattr__(self, name, value):
            if name == "total":
                totals.append(value)
            super().__setattr__(name, value)

    monkeypatch.setattr(tqdm.auto, "tqdm", Recorder)
    update, close = compile_module._progress_bar()
    for done in (1, 300, 1543):  # the total is the lexer's configuration count, known before the walk
        update(done, 1543)
    close()
    assert totals and set(totals) == {1543}, totals


def test_analysis_steps_are_shown(capsys, tmp_path):
    analyze_grammar("json", ToyVocab.make(), cache=tmp_path, progress=True, document_tokens=[])
    err = capsys.readouterr().err
    for step in ("grammar analysis", "streamlining", "one-hop successor baseline", "successor pairs",
                 "always-legal pairs", "decoding the document"):
        assert step in err, step
    quiet = analyze_grammar("json", ToyVocab.make(), cache=tmp_path, progress=False)
    assert quiet.steps and capsys.readouterr().err == ""


def test_library_calls_are_quiet_unless_stderr_is_a_terminal_or_asked(capsys, tmp_path, monkeypatch):
    """compile_grammar (and through it cfg_generator, analyze_grammar) drew bars by default, into logs too."""
    import io
    import sys

    from cad_outlines import compile_grammar

    compile_grammar("json", ToyVocab.make(), cache=False)  # captured stderr: not a terminal
    analyze_grammar("json", ToyVocab.make(), cache=tmp_path)
    assert capsys.readouterr().err == ""
    compile_grammar("json", ToyVocab.make(), cache=False, progress=True)  # asked: drawn anyway
    assert "compile" in capsys.readouterr().err

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert compile_module.show_progress(None) and not compile_module.show_progress(False)
    compile_grammar("json", ToyVocab.make(), cache=False)
    assert "compile" in terminal.getvalue()


def test_analyze_command_draws_no_bar_into_a_log(capsys, tmp_path, monkeypatch):
    """`cad-outlines analyze`'s bar printed also when stderr was not a terminal."""
    from cad_outlines.cli import main
    from tests.fixture_data import SMALL

    gpt2 = str(SMALL / "tokenizers" / "gpt2")
    monkeypatch.setenv("CAD_OUTLINES_CACHE", str(tmp_path / "cache"))
    assert main(["analyze", "json", "--tokenizer", gpt2, "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().err == ""
    assert main(["analyze", "json", "--tokenizer", gpt2, "--out", str(tmp_path), "--progress"]) == 0
    assert "analysis" in capsys.readouterr().err
