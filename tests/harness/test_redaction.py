"""Secrets are masked in what streamcert writes; everything else stays as it was."""

from __future__ import annotations

from streamcert.harness.redaction import MASK, redact, redact_text


def test_libpq_and_url_passwords_are_masked_and_the_rest_kept():
    assert redact_text("host=db port=5432 user=app password=s3cr3t dbname=x") == \
        f"host=db port=5432 user=app password={MASK} dbname=x"
    assert redact_text("host=db password='with space\\' quote' user=u") == f"host=db password={MASK} user=u"
    assert redact_text("postgresql://app:s3cr3t@db:5432/x") == f"postgresql://app:{MASK}@db:5432/x"
    assert redact_text("host=127.0.0.1 port=1 passfile=/tmp/x/client.pgpass") == \
        "host=127.0.0.1 port=1 passfile=/tmp/x/client.pgpass"
    assert redact_text("http://127.0.0.1:8474") == "http://127.0.0.1:8474"


def test_nested_values_and_secret_named_keys():
    value = {"endpoints": {"postgres_dsn": "host=h password=pw"}, "options": {"kafka.sasl.password": "pw2",
             "sinkId": "s1"}, "run_token": "abc", "list": ["postgres://u:pw3@h/d", 3, None], "password": ""}
    masked = redact(value)
    assert "pw" not in str(masked).replace("password", "").replace("passfile", "")
    assert masked["options"]["sinkId"] == "s1" and masked["run_token"] == "abc" and masked["list"][1:] == [3, None]
    assert masked["password"] == "" and value["options"]["kafka.sasl.password"] == "pw2"  # the input is untouched


def test_a_saved_run_result_holds_no_password(tmp_path):
    from streamcert.harness.results import RunResult

    result = RunResult(scenario={"name": "s", "postgres_dsn": "host=h user=u password=hunter2"}, seed=1)
    text = result.save(tmp_path / "results.json").read_text()
    assert "hunter2" not in text and f"password={MASK}" in text
