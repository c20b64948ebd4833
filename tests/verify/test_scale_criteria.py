import pytest

from veriscale.errors import UserError
from veriscale.verify.criteria import load_criteria, parse_criteria
from veriscale.verify.scale import parse_scale


def test_letters_map_linearly_with_a_best():
    s = parse_scale("letters")
    assert s.granularity == 20 and s.labels[0] == "A" and s.labels[-1] == "T"
    assert s.value("A") == 1.0 and s.value("T") == 0.0
    assert s.expectation({"A": 0.5, "T": 0.5}) == pytest.approx(0.5)


def test_expectation_separates_what_argmax_collapses():
    s = parse_scale("digits")
    confident = {"9": 0.95, "8": 0.05}
    torn = {"9": 0.51, "8": 0.49}
    assert s.argmax_value(confident) == s.argmax_value(torn)
    assert s.expectation(confident) > s.expectation(torn)


def test_expectation_renormalises_over_labels():
    s = parse_scale("yesno")
    assert s.expectation({"Yes": 0.2, "No": 0.2}) == pytest.approx(0.5)


@pytest.mark.parametrize("spec", ["letters:1", "letters:27", "digits:10", "stars", "labels:a", "labels:a,a"])
def test_bad_scales_raise_a_user_error(spec):
    with pytest.raises(UserError):
        parse_scale(spec)


def test_custom_labels_best_first():
    s = parse_scale("labels:good,ok,bad")
    assert s.value("good") == 1.0 and s.value("ok") == 0.5


def test_builtin_agent_criteria_are_the_seed_three():
    c = load_criteria("agent")
    assert [x.name for x in c.items] == ["Specification", "Output", "Errors"]
    assert c.note  # always-shown note


def test_criteria_file_with_only_h1_headings(tmp_path):
    f = tmp_path / "c.md"
    f.write_text("# Speed\nIs it fast?\n# Safety\nIs it safe?\n")
    assert [x.name for x in load_criteria(str(f)).items] == ["Speed", "Safety"]


def test_criteria_without_headings_is_a_user_error(tmp_path):
    f = tmp_path / "c.md"
    f.write_text("just some prose, no headings\n")
    with pytest.raises(UserError, match="no criteria"):
        load_criteria(str(f))


def test_criterion_without_description_is_a_user_error():
    with pytest.raises(UserError, match="no description"):
        parse_criteria("## A\n\n## B\ntext\n", "x.md")


def test_only_selects_and_rejects_unknown():
    c = load_criteria("general")
    assert [x.name for x in c.only(["correctness"]).items] == ["Correctness"]
    with pytest.raises(UserError, match="not in criteria set"):
        c.only(["Style"])
