"""tests/integrations/deepeval_cases run only under DeepEval's own virtualenv (.tools/deepeval-venv,
made by scripts/install-test-tools.sh): DeepEval pins rich<15 and click<8.4 and brings pytest
plugins, so it never enters this environment. test_deepeval_metric.py runs them there."""

collect_ignore = ["deepeval_cases"]
