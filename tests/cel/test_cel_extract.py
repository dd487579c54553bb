"""The KEP-5981 extractor evaluation contract (extract())."""

from __future__ import annotations

import pytest

from dra_affinity.cel import (
    SHARING_AFFINITY_CEL_MAX_COST,
    ConfigObject,
    Environment,
    Extractor,
    OutcomeKind,
    extract,
)

GUARD = 'object.apiVersion == "networking.example.com/v1" && object.kind == "NICConfig"'
SUBNET = Extractor("subnet", f"{GUARD} ? object.subnetID : \"\"")
PKEY = Extractor("pkey", f"{GUARD} ? object.ibPKey : \"\"")


def nic(subnet: str = "subnet-A", pkey: str = "0x8001", **extra: object) -> dict[str, object]:
    return {
        "apiVersion": "networking.example.com/v1",
        "kind": "NICConfig",
        "vendor": "acme",
        "subnetID": subnet,
        "ibPKey": pkey,
        "qos": "gold",
        "mtu": 9000,
        "vlanTag": 100,
        **extra,
    }


def cfg(i: int, params: object) -> ConfigObject:
    return ConfigObject(f"claim default/c1 spec.devices.config[{i}]", params)


def test_ok_merges_keys_sorted() -> None:
    r = extract([SUBNET, PKEY], [cfg(0, nic())])
    assert r.kind is OutcomeKind.OK
    assert r.keys == (("pkey", "0x8001"), ("subnet", "subnet-A"))
    assert r.as_dict() == {"subnet": "subnet-A", "pkey": "0x8001"}
    assert r.evaluations == 2
    assert r.cost > 0
    assert r.extractor is None and r.source is None
    assert r.ok


def test_driver_private_fields_are_ignored() -> None:
    a = extract([SUBNET, PKEY], [cfg(0, nic(qos="gold", mtu=9000))])
    b = extract([SUBNET, PKEY], [cfg(0, nic(qos="bronze", mtu=1500, extra={"deep": [1, 2]}))])
    assert a.kind is b.kind is OutcomeKind.OK
    assert a.keys == b.keys


def test_empty_string_is_not_a_contribution() -> None:
    other = {"apiVersion": "other.example.com/v1", "kind": "Tuning", "x": 1}
    r = extract([SUBNET, PKEY], [cfg(0, other), cfg(1, nic())])
    assert r.kind is OutcomeKind.OK
    assert r.as_dict() == {"subnet": "subnet-A", "pkey": "0x8001"}
    assert r.evaluations == 4
    # only "" everywhere: strict gating, not an error
    r = extract([SUBNET], [cfg(0, other)])
    assert r.kind is OutcomeKind.NO_KEYS
    # "" next to a value for the same key does not conflict with it
    split = [Extractor("k", "object.v")]
    r = extract(split, [cfg(0, {"v": ""}), cfg(1, {"v": "x"}), cfg(2, {"v": ""})])
    assert r.kind is OutcomeKind.OK and r.as_dict() == {"k": "x"}


def test_same_value_from_two_configs_is_fine() -> None:
    r = extract([SUBNET, PKEY], [cfg(0, nic()), cfg(1, nic())])
    assert r.kind is OutcomeKind.OK
    assert r.as_dict() == {"subnet": "subnet-A", "pkey": "0x8001"}


def test_keys_may_come_from_different_configs() -> None:
    only_subnet = Extractor("subnet", "has(object.subnetID) ? object.subnetID : ''")
    only_pkey = Extractor("pkey", "has(object.ibPKey) ? object.ibPKey : ''")
    r = extract([only_subnet, only_pkey], [cfg(0, {"subnetID": "s"}), cfg(1, {"ibPKey": "p"})])
    assert r.kind is OutcomeKind.OK
    assert r.as_dict() == {"pkey": "p", "subnet": "s"}


def test_self_inconsistent_names_key_values_and_sources() -> None:
    r = extract([SUBNET, PKEY], [cfg(0, nic(subnet="subnet-A")), cfg(1, nic(subnet="subnet-B"))])
    assert r.kind is OutcomeKind.SELF_INCONSISTENT
    assert r.extractor == "subnet"
    assert r.source == "claim default/c1 spec.devices.config[1]"
    for fragment in ("subnet", "subnet-A", "subnet-B", "config[0]", "config[1]"):
        assert fragment in r.message
    assert r.keys == ()
    assert r.as_dict() == {}
    assert r.evaluations == 4


def test_partial_keys_is_no_keys_naming_the_missing_key() -> None:
    r = extract([SUBNET, PKEY], [cfg(0, nic(pkey=""))])
    assert r.kind is OutcomeKind.NO_KEYS
    assert r.extractor == "pkey"
    assert "'pkey'" in r.message
    assert "'subnet'" not in r.message
    assert r.keys == ()


def test_no_configs_is_no_keys() -> None:
    r = extract([SUBNET, PKEY], [])
    assert r.kind is OutcomeKind.NO_KEYS
    assert "'subnet'" in r.message and "'pkey'" in r.message
    assert r.evaluations == 0


def test_no_extractors_is_ok_and_empty() -> None:
    r = extract([], [cfg(0, nic())])
    assert r.kind is OutcomeKind.OK
    assert r.keys == ()
    assert r.evaluations == 0
    assert extract([], []).kind is OutcomeKind.OK


def test_missing_field() -> None:
    unguarded = Extractor("subnet", "object.subnet")
    r = extract([unguarded], [cfg(0, nic())])
    assert r.kind is OutcomeKind.MISSING_FIELD
    assert r.extractor == "subnet"
    assert r.source == "claim default/c1 spec.devices.config[0]"
    assert "no such key: subnet" in r.message
    assert "config[0]" in r.message


def test_cel_runtime_error() -> None:
    bad = Extractor("subnet", "string(1 / (object.mtu - 9000))")
    r = extract([bad], [cfg(0, nic())])
    assert r.kind is OutcomeKind.CEL_ERROR
    assert "division by zero" in r.message
    assert r.extractor == "subnet"


@pytest.mark.parametrize(
    ("expression", "shown"),
    [
        ("object.mtu", "int"),
        ("object.qos == 'gold'", "bool"),
        ("null", "null_type"),
        ("object.missing_ok_null", "null_type"),
        ("[object.qos]", "list"),
        ("{'a': object.qos}", "map"),
        ("1.5", "double"),
        ("b'x'", "bytes"),
    ],
)
def test_non_string(expression: str, shown: str) -> None:
    r = extract([Extractor("k", expression)], [cfg(0, nic(missing_ok_null=None))])
    assert r.kind is OutcomeKind.NON_STRING
    assert shown in r.message
    assert "'k'" in r.message and "config[0]" in r.message


def test_cost_exceeded() -> None:
    heavy = Extractor("k", "object.l.all(a, object.l.all(b, object.l.all(c, a + b + c >= 0))) ? 'x' : ''")
    r = extract([heavy], [cfg(0, {"l": list(range(300))})])
    assert r.kind is OutcomeKind.COST_EXCEEDED
    assert r.extractor == "k"
    assert r.cost > SHARING_AFFINITY_CEL_MAX_COST


def test_compile_error_is_cel_error_naming_extractor() -> None:
    r = extract([SUBNET, Extractor("broken", "object.a +")], [cfg(0, nic())])
    assert r.kind is OutcomeKind.CEL_ERROR
    assert r.extractor == "broken"
    assert "'broken'" in r.message
    assert r.evaluations == 0


def test_slice_error_beats_self_inconsistency() -> None:
    configs = [cfg(0, nic(subnet="A")), cfg(1, nic(subnet="B")), cfg(2, {"apiVersion": 1})]
    strict = Extractor("subnet", "object.apiVersion.startsWith('networking') ? object.subnetID : ''")
    r = extract([strict], configs)
    assert r.kind is OutcomeKind.CEL_ERROR  # config[2]'s int apiVersion has no startsWith
    assert r.source.endswith("config[2]") if r.source else False


def test_slice_error_beats_no_keys_and_stops_at_the_first() -> None:
    ex = [Extractor("a", "object.x"), Extractor("b", "object.y")]
    r = extract(ex, [cfg(0, {"x": "1"}), cfg(1, {"x": 2, "y": "q"})])
    assert r.kind is OutcomeKind.MISSING_FIELD  # b on config[0]: evaluation order is config, then extractor
    assert r.extractor == "b"
    assert r.source.endswith("config[0]") if r.source else False
    assert r.evaluations == 2


def test_first_slice_error_in_evaluation_order_wins() -> None:
    ex = [Extractor("a", "object.n"), Extractor("b", "object.missing")]
    r = extract(ex, [cfg(0, {"n": 1})])
    assert r.kind is OutcomeKind.NON_STRING  # a is evaluated (and fails) before b
    assert r.extractor == "a"


def test_budget_is_shared_by_every_extractor_over_every_config() -> None:
    """One budget per extraction: the request's configs do not each start afresh, so
    what an attempt spends does not grow with the number of configs."""
    # Each extractor costs 10 + 100 * 5 + 1 + 2 = 513 on a 100-element list.
    cheap = "object.l.all(x, x >= 0) ? 'v' : ''"
    ex = [Extractor("a", cheap), Extractor("b", cheap)]
    configs = [cfg(0, {"l": list(range(100))}), cfg(1, {"l": list(range(100))})]
    single = extract([ex[0]], configs[:1]).cost
    assert extract(ex, configs, budget=4 * single).kind is OutcomeKind.OK  # 2 extractors x 2 configs
    r = extract(ex, configs, budget=4 * single - 1)
    assert r.kind is OutcomeKind.COST_EXCEEDED  # the last extractor of config[1] runs out
    assert r.extractor == "b"
    assert r.source.endswith("config[1]") if r.source else False
    r = extract(ex, configs, budget=2 * single)  # enough for one config only
    assert r.kind is OutcomeKind.COST_EXCEEDED and r.source is not None and r.source.endswith("config[1]")


def test_many_configs_cost_at_most_one_budget() -> None:
    """32 configs of an expensive extractor: the run stops once, at one budget's worth."""
    heavy = "object.l.all(x, object.l.all(y, x + y >= 0)) ? 'v' : ''"
    configs = [cfg(i, {"l": list(range(300))}) for i in range(32)]
    r = extract([Extractor("a", heavy)], configs, budget=1_000_000)
    assert r.kind is OutcomeKind.COST_EXCEEDED
    assert r.cost <= 1_000_000 + 10_000  # the budget plus at most one step's overrun
    assert r.source is not None and not r.source.endswith("config[31]")


def test_custom_environment() -> None:
    env = Environment("test", {"object": "dyn"})
    r = extract([Extractor("k", "object.v")], [cfg(0, {"v": "x"})], env=env)
    assert r.kind is OutcomeKind.OK


def test_outcome_kind_values_and_classes() -> None:
    assert [k.value for k in OutcomeKind] == [
        "OK", "NoKeys", "SelfInconsistent", "ValueTooLong", "CELError", "MissingField", "NonString",
        "CostExceeded",
    ]
    assert OutcomeKind.MISSING_FIELD.is_slice_error
    assert not OutcomeKind.SELF_INCONSISTENT.is_slice_error
    assert not OutcomeKind.NO_KEYS.is_slice_error


def test_has_guard_idiom() -> None:
    ex = Extractor("subnet", "has(object.subnet) ? object.subnet : ''")
    assert extract([ex], [cfg(0, {"other": 1})]).kind is OutcomeKind.NO_KEYS
    assert extract([ex], [cfg(0, {"subnet": "s"})]).as_dict() == {"subnet": "s"}
    # has() on a value that is not a map answers false (cel-go), so the guard holds
    assert extract([ex], [cfg(0, "not an object")]).kind is OutcomeKind.NO_KEYS
    # selecting from it without the guard is still an error
    plain = Extractor("subnet", "object.subnet")
    assert extract([plain], [cfg(0, "not an object")]).kind is OutcomeKind.CEL_ERROR


# -- the bound on a sharing-affinity value's length --------------------------------


def test_value_at_the_length_limit_is_ok() -> None:
    from dra_affinity.cel import MAX_AFFINITY_VALUE_LENGTH

    value = "s" * MAX_AFFINITY_VALUE_LENGTH
    r = extract([SUBNET], [cfg(0, nic(subnet=value))])
    assert r.kind is OutcomeKind.OK
    assert r.as_dict() == {"subnet": value}


@pytest.mark.parametrize(
    "value",
    ["s" * 257, "\u00e9" * 129, "\u00e9" * 128 + "x"],  # 257 bytes, 258 bytes, 257 bytes
)
def test_value_past_the_length_limit_is_a_claim_error(value: str) -> None:
    r = extract([SUBNET, PKEY], [cfg(0, nic(subnet=value))])
    assert r.kind is OutcomeKind.VALUE_TOO_LONG
    assert r.kind.is_claim_error and not r.kind.is_slice_error
    assert r.keys == ()
    assert r.extractor == "subnet"
    assert r.source == "claim default/c1 spec.devices.config[0]"
    assert "longer than 256 bytes" in r.message
    assert r.evaluations == 2  # the other extractors still run: a slice error would win


def test_multibyte_value_under_the_byte_limit_is_ok() -> None:
    value = "\u00e9" * 128  # 128 characters, 256 bytes
    r = extract([SUBNET], [cfg(0, nic(subnet=value))])
    assert r.kind is OutcomeKind.OK


def test_slice_error_takes_precedence_over_a_long_value() -> None:
    bad = Extractor("qos", "object.missing")
    r = extract([SUBNET, bad], [cfg(0, nic(subnet="s" * 1000))])
    assert r.kind is OutcomeKind.MISSING_FIELD


def test_long_value_takes_precedence_over_inconsistency_and_no_keys() -> None:
    r = extract(
        [SUBNET, Extractor("other", '""')],
        [cfg(0, nic(subnet="a")), cfg(1, nic(subnet="b")), cfg(2, nic(subnet="x" * 300))],
    )
    assert r.kind is OutcomeKind.VALUE_TOO_LONG
    assert r.source == "claim default/c1 spec.devices.config[2]"


def test_outcome_classes_partition_the_errors() -> None:
    for kind in OutcomeKind:
        assert not (kind.is_slice_error and kind.is_claim_error)
    assert {k for k in OutcomeKind if k.is_claim_error} == {
        OutcomeKind.SELF_INCONSISTENT,
        OutcomeKind.VALUE_TOO_LONG,
    }
