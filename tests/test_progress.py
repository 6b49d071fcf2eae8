"""Long work shows progress (issue 12, item 11): the analysis steps after the mask store are
no longer silent, and the mask-store bar no longer shows a total that grows as it runs."""

from cad_outlines.engine import compile as compile_module
from cad_outlines.grammar_report import analyze_grammar
from tests.test_engine import ToyVocab


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
