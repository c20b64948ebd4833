import math

import numpy as np
import pytest

from tests.support.scripted_model import ScriptedScoreModel
from veriscale.engine.store import Store
from veriscale.errors import UserError
from veriscale.verify import calibration as cal
from veriscale.verify.reward import Verifier


def test_spread_maps_the_90th_percentile_gap_to_p_09():
    diffs = list(np.linspace(-0.05, 0.05, 101))
    tau = cal.fit_tau_spread(diffs)
    q = float(np.quantile(np.abs(diffs), 0.9))
    assert 1 / (1 + math.exp(-q / tau)) == pytest.approx(0.9)


def test_mle_recovers_the_generating_temperature():
    rng = np.random.default_rng(0)
    d = rng.uniform(-0.3, 0.3, 4000)
    y = rng.random(4000) < 1 / (1 + np.exp(-d / 0.05))
    assert cal.fit_tau_mle(list(d), list(y)) == pytest.approx(0.05, rel=0.15)


def test_no_signal_falls_back_to_default():
    assert cal.fit_tau_spread([0.0, 0.0]) == cal.DEFAULT_TAU
    assert cal.fit_tau_mle([0.0], [True]) == cal.DEFAULT_TAU


def test_stored_tau_is_used_by_the_verifier(tmp_path):
    store = Store.open(tmp_path / "s.sqlite3")
    model = ScriptedScoreModel()
    store.set_meta(cal.tau_key(model.fingerprint(), "letters:20", False), "0.02")
    res = Verifier(model, store=store).compare("t", "GOOD", "bad")
    assert res.tau == 0.02 and res.p_a_wins > 0.99


def test_pairs_file_errors(tmp_path):
    bad = tmp_path / "p.jsonl"
    bad.write_text('{"instruction": "x"}\n')
    with pytest.raises(UserError, match="line 1"):
        cal.load_labelled_pairs(str(bad))
    with pytest.raises(UserError, match="does not exist"):
        cal.load_labelled_pairs(str(tmp_path / "nope.jsonl"))


def test_a_tau_calibrated_under_another_prompt_version_is_not_reused(tmp_path) -> None:
    from veriscale.engine.store import Store
    from veriscale.verify.prompts import PROMPT_VERSION

    store = Store.open(tmp_path / "s.sqlite3")
    old_key = "tau:model-x:v1:letters:20:continuous"
    store.set_meta(old_key, "0.5")
    assert PROMPT_VERSION in cal.tau_key("model-x", "letters:20", False) and PROMPT_VERSION != "v1"
    assert cal.tau_for(store, "model-x", "letters:20", False) == cal.DEFAULT_TAU
    store.set_meta(cal.tau_key("model-x", "letters:20", False), "0.25")
    assert cal.tau_for(store, "model-x", "letters:20", False) == 0.25


def test_tau_is_kept_per_criteria_set_and_a_set_without_one_says_it_is_uncalibrated(tmp_path) -> None:
    from veriscale.verify.criteria import load_criteria

    store = Store.open(tmp_path / "s.sqlite3")
    model = ScriptedScoreModel()
    general, swe = load_criteria("general"), load_criteria("swe")
    assert cal.criteria_tag(general) == ""  # the general pack whole keeps the key calibrations had before packs
    store.set_meta(cal.tau_key(model.fingerprint(), "letters:20", False), "0.02")
    assert Verifier(model, store=store, criteria="general").compare("t", "GOOD", "bad").tau == 0.02

    on_swe = Verifier(model, store=store, criteria="swe").compare("t", "GOOD", "bad")
    assert on_swe.tau == cal.DEFAULT_TAU  # general's τ is not swe's: C and the criteria differ
    assert any("uncalibrated" in n and "'swe', 3 criteria" in n and "--criteria swe" in n for n in on_swe.notes)

    store.set_meta(cal.tau_key(model.fingerprint(), "letters:20", False, cal.criteria_tag(swe)), "0.03")
    calibrated = Verifier(model, store=store, criteria="swe").compare("t", "GOOD", "bad")
    assert calibrated.tau == 0.03 and not any("uncalibrated" in n for n in calibrated.notes)

    subset = general.only([c.name for c in general.items[:2]])  # C = 2: rewards spread differently
    assert cal.criteria_tag(subset) not in ("", cal.criteria_tag(general), cal.criteria_tag(swe))
    assert cal.criteria_tag(subset).startswith("general/2/")


def test_models_calibrate_stores_tau_under_the_criteria_it_ran(tmp_path) -> None:
    import json

    from typer.testing import CliRunner

    from tests.support.scripted_model import registered_scheme
    from veriscale.cli import app
    from veriscale.verify.criteria import load_criteria

    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"instruction": f"task {i}", "output_1": "GOOD answer" if i % 2 else "meh",
                                         "output_2": "meh" if i % 2 else "GOOD answer", "label": 1 if i % 2 else 2}) + "\n"
                             for i in range(4)))
    with registered_scheme("scriptedcal", lambda _uri: ScriptedScoreModel(), ("scriptedcal:",)):
        result = CliRunner().invoke(app, ["models", "calibrate", "scriptedcal:", "--pairs", str(pairs), "--criteria",
                                          "swe", "--store", str(tmp_path / "s.sqlite3"), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["criteria"] == "swe"
    store = Store.open(tmp_path / "s.sqlite3")
    rows, _ = store.execute("SELECT key FROM meta WHERE key LIKE 'tau:%'")
    assert [k for (k,) in rows] == [cal.tau_key(ScriptedScoreModel().fingerprint(), "letters:20", False,
                                                cal.criteria_tag(load_criteria("swe")))]
