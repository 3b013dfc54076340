"""OptionRules: a connector declares its options once and reads Spark's map with one call."""

from __future__ import annotations

import pytest

from streamcert.spi.errors import ConfigurationError
from streamcert.spi.options import SPARK_READER_OPTIONS, SPARK_WRITER_OPTIONS, OptionRules, OptionValues

RULES = OptionRules(
    {"url": "a URL (required)", "batchSize": "a positive integer (default 10)", "mode": "fast (default) or safe",
     "group": "a group name"},
    "example sink", required=("url",), aliases={"size": "batchSize"},
    passthrough="client.", passthrough_hint="client settings start with 'client.'",
    reserved=frozenset({"client.id"}), reserved_hint="The sink names its client itself.",
    spark_own=SPARK_WRITER_OPTIONS)


def _error(options) -> str:
    with pytest.raises(ConfigurationError) as info:
        RULES.read(options)
    return str(info.value)


def test_read_gives_documented_names_and_typed_values():
    values = RULES.read({"URL": " http://x ", "batchsize": "25", "Client.Linger": "5", "checkpointLocation": "/cp",
                         "PATH": "/p"})
    assert isinstance(values, OptionValues)
    assert dict(values) == {"url": " http://x ", "batchSize": "25", "client.linger": "5"}
    assert values.text("url") == "http://x" and values.integer("batchSize", 10, 1) == 25
    assert values.choice("mode", ("fast", "safe")) == "fast" and values.text("group") is None
    assert values.passthrough() == {"linger": "5"}


def test_an_alias_means_its_documented_option():
    assert RULES.read({"url": "u", "SIZE": "3"}).integer("batchSize", 10, 1) == 3
    assert RULES.read({"url": "u", "size": "3", "batchSize": "3"})["batchSize"] == "3"
    with pytest.raises(ConfigurationError, match="size='3' and batchSize='4' set the same option batchSize"):
        RULES.read({"url": "u", "size": "3", "batchSize": "4"})


def test_unknown_options_are_listed_with_the_known_ones_and_the_pass_through_prefix():
    text = _error({"url": "u", "zeta": "1", "Alpha": "2"})
    assert "Unknown option(s) for the example sink: Alpha, zeta." in text
    assert "Hint: Known options: url, batchSize, mode, group; client settings start with 'client.'." in text


def test_reserved_settings_are_refused_with_the_connectors_hint():
    text = _error({"url": "u", "CLIENT.ID": "me"})
    assert "Option(s) client.id are set by the example sink itself and cannot be overridden." in text
    assert "Hint: The sink names its client itself." in text


def test_a_required_option_missing_or_blank_is_named_with_what_it_takes():
    assert "Option url is missing for the example sink. Hint: url takes a URL (required)." in _error({})
    assert "Option url='  ' is not valid for the example sink. Hint: url takes a URL (required)." in _error(
        {"url": "  "})


def test_checks_run_in_order_unknown_then_reserved_then_required():
    assert "Unknown option(s)" in _error({"nope": "1", "client.id": "x"})
    assert "cannot be overridden" in _error({"client.id": "x"})


@pytest.mark.parametrize("raw", ["0", "x", "1.5"])
def test_typed_values_name_the_option_and_what_it_takes(raw):
    values = RULES.read({"url": "u", "batchSize": raw})
    with pytest.raises(ConfigurationError, match=f"batchSize='{raw}' is not valid.*takes a positive integer"):
        values.integer("batchSize", 10, 1)


def test_choice_and_bad():
    values = RULES.read({"url": "u", "mode": "slow"})
    with pytest.raises(ConfigurationError, match="mode='slow'.*fast \\(default\\) or safe"):
        values.choice("mode", ("fast", "safe"))
    assert "url='u'" in str(values.bad("url")) and "url='v'" in str(values.bad("url", "v"))


def test_spark_own_names_are_errors_unless_declared():
    reader = OptionRules({"url": "a URL"}, "example source", spark_own=SPARK_READER_OPTIONS)
    assert dict(reader.read({"url": "u", "path": "/p"})) == {"url": "u"}
    with pytest.raises(ConfigurationError, match="Unknown option.*checkpointLocation"):
        reader.read({"url": "u", "checkpointLocation": "/cp"})
    assert OptionRules({"url": "a URL"}, "x").read({"URL": "u"}).passthrough() == {}


def test_rules_that_require_or_alias_an_undocumented_option_are_a_bug():
    with pytest.raises(ValueError, match="not in known"):
        OptionRules({"url": "a URL"}, "x", required=("uri",))
    with pytest.raises(ValueError, match="not in known"):
        OptionRules({"url": "a URL"}, "x", aliases={"u": "uri"})
