"""A seeded generator of CEL cases for the differential suite.

Each case is an expression plus its input (a random ``object`` map, or a
random device for the selector environment) and a *family* naming the feature
it exercises, so that disagreements can be grouped and allow-listed by class.

Expressions come from templates with typed holes (``{int}``, ``{str}``,
``{list}``...) filled recursively with random sub-expressions of about that
type. Holes are sometimes filled with ``object`` fields (dynamically typed,
so type errors surface at runtime) and some families are ill-typed or
malformed on purpose: both implementations must then agree on the error class.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any, Final


@dataclass(frozen=True)
class CelCase:
    family: str
    env: str  # "object" or "device"
    expression: str
    data: Any  # the object JSON, or the device JSON


INT64_MAX: Final = 2**63 - 1

ATOMS: Final[dict[str, tuple[str, ...]]] = {
    "int": ("0", "1", "2", "3", "-1", "-7", "7", "42", "100", "9223372036854775807",
            "-9223372036854775808", "-9223372036854775807", "4611686018427387904", "0x10"),
    "small": ("0", "1", "2", "3", "-1", "5"),
    "uint": ("0u", "1u", "2u", "7u", "18446744073709551615u", "9223372036854775808u"),
    "double": ("0.0", "0.5", "1.0", "-2.5", "3.25", "1e308", "-1e308", "0.1", "2.0", "1e-300",
               "123456789.0"),
    "str": ("''", "'a'", "'abc'", "'Hello World'", "'a,b,c'", "'h\u00e9llo'", "'10'", "'-3'",
            "'2.5'", "' x '", "'AbC'", "'1Gi'", "'1.2.3'", "'10.0.0.1'", "'\u4e16\u754c'",
            "\"quote'd\"", "'true'", "'1e3'"),
    "bool": ("true", "false"),
    "list": ("[1, 2, 3]", "[]", "[3, 1, 2]", "[1, 1, 2]", "[-5, 10]", "['a', 'b']",
             "['b', 'a', 'c']", "[1.5, 0.5]", "[[1], [2, 3]]", "[true, false]"),
    "ilist": ("[1, 2, 3]", "[]", "[3, 1, 2]", "[1, 1, 2]", "[-5, 10]", "[9223372036854775807, 1]"),
    "slist": ("['a', 'b']", "[]", "['b', 'a', 'c']", "['x']", "['', 'a,b']"),
    "map": ("{'a': 1, 'b': 2}", "{}", "{'k': 'v'}", "{1: 'one', 2: 'two'}", "{'a': {'b': 1}}"),
    "bytes": ("b'abc'", "b''", "b'\\xff\\x00'", "b'hello'"),
    "regex": ("'[0-9]+'", "'^a'", "'b$'", "'(a|b)+'", "'.*'", "'['", "'\\\\d'", "'[[:alpha:]]+'",
              "'(?i)abc'", "'x{2,3}'"),
    "qty": ("'1Gi'", "'1000Mi'", "'1.5'", "'100m'", "'200M'", "'0.2G'", "'1,3G'", "'-1'",
            "'1e3'", "'10Ki'", "'0'", "'abc'", "'1.5Gi'", "'123456789123456789'"),
    "semver": ("'1.2.3'", "'1.10.0'", "'1.9.0'", "'2.0.0-alpha'", "'v1.2.3'", "'1.2'", "'01.2.3'",
               "'1.2.3+build'", "'x'"),
    "ipstr": ("'10.0.0.1'", "'::1'", "'192.168.1.300'", "'fe80::1%eth0'", "'127.0.0.1'",
              "'2001:db8::1'", "'1.2.3'", "'::ffff:1.2.3.4'"),
    "cidrstr": ("'10.0.0.0/8'", "'192.168.0.0/16'", "'::1/128'", "'10.0.0.1/24'", "'1.2.3.4/33'",
                "'2001:db8::/32'"),
    "urlstr": ("'https://example.com:8443/a/b?x=1#f'", "'http://[::1]/'", "'not a url'",
               "'/relative/path'", "'https://user@host/'"),
    "tsstr": ("'2024-01-02T03:04:05Z'", "'2024-03-10T07:30:00.123456789+05:30'", "'1999-12-31T23:59:59-08:00'",
              "'0001-01-01T00:00:00Z'", "'9999-12-31T23:59:59.999999999Z'", "'2024-02-30T00:00:00Z'",
              "'2024-01-02 03:04:05Z'", "'2024-01-02T03:04:05'"),
    "durstr": ("'1h30m'", "'-1.5s'", "'300ms'", "'2us'", "'0'", "'1h1m1s1ms1us1ns'", "'.5h'", "'1x'", "''",
               "'2562047h47m16.854775807s'", "'2562047h47m16.854775808s'"),
    "tz": ("'America/New_York'", "'Asia/Kolkata'", "'UTC'", "'+05:30'", "'-02:15'", "'Mars/Base'", "'5:30'",
           "'Europe/Berlin'", "'+05:99'"),
    # Go's regexp syntax and limits where RE2 differs or where a program grows large
    "goregex": ("r'\\pL{999}'", "r'(?:\\pL|\\pN){1000}'", "r'(?i)\\pL{500}'", "r'\\C'", "r'x{1000}'",
                "r'x{1001}'", "r'(?:a{10}){100}'", "r'(?:a{10}){101}'", "r'((a{2}){2}){250}'",
                "r'(?P<n>a)(?P<n>b)'", "r'(?<n>a)'", "r'(?P<n>a)'", "r'[\\b]'", "r'(?)'", "r'(?i-)a'",
                "r'(?i)k'", "r'\\123'", "r'\\8'", "r'\\x{10FFFF}'", "r'\\x{110000}'", "r'\\Q.*\\E'",
                "r'\\pX'", "r'\\p{Greek}+'", "r'\\p{^Greek}'", "r'[[:word:]]+'", "r'[[:foo:]]'",
                "r'a.{0,999}c'", "r'\\z'", "r'\\Z'", "r'(?U)a+'", "r'a{,5}'", "r'a**'", "r'a*?'",
                "r'(?s).'", "r'[^\\x00-\\x{10FFFF}]'", "r'\\pN{2,3}'", "r'(a|b'", "r'a)'", "r'[a'",
                "r'x{2,1}'", "r'(?m)^a$'", "r'\\e'", "r'\\v'", "r'(?P<>a)'", "r'(?P<a-b>x)'",
                "r'\\pL{20}'", "r'[\\d\\pL]{3}'", "r'(?i)\\p{Lu}'", "r'\\1'", "r'\\0'", "r'[a-\\d]'",
                "r'(((((((((((a)))))))))))'", "r'(?:(?:(?:a{2}){2}){2}){125}'", "r'\\b*'", "r'^*'"),
    # numbers at the 64-bit edges, where comparing an int (or uint) with a double rounds
    "edge": ("9223372036854775807", "-9223372036854775808", "9223372036854775808.0",
             "-9223372036854775808.0", "18446744073709551615u", "18446744073709551616.0",
             "9223372036854775808u", "9223372036854775807u", "9007199254740993", "9007199254740992.0",
             "double('NaN')", "1e308", "-0.0", "0", "0u", "1.0", "1", "object.big", "object.count",
             "9223372036854775806.0", "18446744073709549568.0"),
    "fmt": ("'%s'", "'%d'", "'%.2f'", "'%e'", "'%x'", "'%X'", "'%o'", "'%b'", "'%s-%s'", "'[%s]'", "'%%%s'",
            "'%.0f'", "'%f %s'", "'%z'", "'%'"),
}

OBJECT_KEYS: Final = ("name", "count", "ratio", "flag", "tags", "nums", "nested", "empty",
                      "big", "mem", "version", "ip", "cidr", "nul", "mixed", "missing",
                      "ts", "dur", "tz", "url", "args")

TEMPLATES: Final[dict[str, tuple[str, ...]]] = {
    # holes that produce a value of a type
    "int": ("{int} + {int}", "{int} - {int}", "{int} * {int}", "{int} / {int}", "{int} % {int}",
            "-{int}", "size({str})", "size({list})", "int({double})", "int({str})", "int({uint})",
            "{str}.indexOf({str})", "({bool} ? {int} : {int})", "{ilist}[{small}]",
            "{ilist}.sum()", "math.greatest({int}, {int})", "math.least({int}, {int})",
            "math.abs({int})", "math.bitAnd({int}, {int})", "math.bitShiftLeft({int}, {small})",
            "{str}.lastIndexOf({str})", "object.count", "object.nums[{small}]", "{ilist}.min()",
            "{ilist}.max()", "duration('1h').getMinutes()", "semver({semver}).getMajor()",
            "quantity({qty}).asInteger()", "quantity({qty}).compareTo(quantity({qty}))",
            "{ilist}.indexOf({int})", "size(object)", "size(object.tags)", "object.big + {int}",
            "{str}.size()"),
    "uint": ("{uint} + {uint}", "{uint} - {uint}", "{uint} * {uint}", "{uint} / {uint}",
             "{uint} % {uint}", "uint({int})", "uint({double})", "uint({str})",
             "math.greatest({uint}, {uint})", "math.bitOr({uint}, {uint})"),
    "double": ("{double} + {double}", "{double} - {double}", "{double} * {double}",
               "{double} / {double}", "-{double}", "double({int})", "double({str})",
               "double({uint})", "math.ceil({double})", "math.floor({double})",
               "math.round({double})", "math.trunc({double})", "math.sqrt({double})",
               "object.ratio", "object.ratio * {double}", "quantity({qty}).asApproximateFloat()",
               "[1.5, 0.5].sum()", "math.abs({double})"),
    "str": ("{str} + {str}", "string({int})", "string({double})", "string({uint})",
            "string({bool})", "string({bytes})", "{str}.lowerAscii()", "{str}.upperAscii()",
            "{str}.substring({small})", "{str}.substring({small}, {small})",
            "{str}.replace({str}, {str})", "{str}.replace({str}, {str}, {small})", "{str}.trim()",
            "{slist}.join({str})", "{slist}.join()", "{str}.charAt({small})", "{str}.find({regex})",
            "strings.quote({str})", "{str}.reverse()", "'%s-%d'.format([{str}, {int}])",
            "'%.2f|%x|%o|%b|%e'.format([{double}, {int}, {int}, {int}, {double}])",
            "({bool} ? {str} : {str})", "object.name", "object.nested.inner.leaf",
            "string(quantity({qty}))", "string(semver({semver}))", "string(ip({ipstr}))",
            "string(cidr({cidrstr}))", "url({urlstr}).getHost()", "url({urlstr}).getScheme()",
            "url({urlstr}).getEscapedPath()", "{str}.split(',')[0]", "base64.encode({bytes})",
            "string(timestamp('2024-01-02T03:04:05Z'))", "string(duration('90m'))",
            "string({list})", "object.?name.orValue('none')", "string(object.name)",
            "string(object.count)", "object.mem"),
    "bool": ("{int} < {int}", "{int} == {int}", "{double} <= {int}", "{uint} > {int}",
             "{str} < {str}", "{str} == {str}", "{bool} != {bool}", "{list} == {list}",
             "{map} == {map}", "{str}.contains({str})", "{str}.startsWith({str})",
             "{str}.endsWith({str})", "{str}.matches({regex})", "{bool} && {bool}",
             "{bool} || {bool}", "!{bool}", "has(object.{key})", "has(object.nested.{key})",
             "{int} in {ilist}", "{str} in {slist}", "{str} in {map}", "'{key}' in object",
             "{ilist}.all(x, x > {int})", "{ilist}.exists(x, x == {int})",
             "{ilist}.exists_one(x, x < {int})", "{ilist}.isSorted()", "{slist}.isSorted()",
             "isQuantity({qty})", "isSemver({semver})", "isIP({ipstr})", "isCIDR({cidrstr})",
             "isURL({urlstr})", "object.flag", "object.flag == {bool}", "object.count > {int}",
             "object.name == {str}", "type({any}) == {typename}", "dyn({any}) == dyn({any})",
             "{int} == {double}", "{uint} == {double}", "{int} < {uint}", "{double} > {uint}",
             "sets.contains({ilist}, {ilist})", "sets.intersects({slist}, {slist})",
             "sets.equivalent({ilist}, {ilist})", "ip({ipstr}).family() == 4",
             "cidr({cidrstr}).containsIP(ip({ipstr}))", "ip({ipstr}).isLoopback()",
             "cidr({cidrstr}).containsCIDR({cidrstr})", "ip.isCanonical({ipstr})",
             "quantity({qty}).isLessThan(quantity({qty}))", "quantity({qty}).isInteger()",
             "semver({semver}).isLessThan(semver({semver}))", "math.isNaN({double} / {double})",
             "math.isInf({double} * {double})", "{list}.all(x, type(x) == int)",
             "object.tags.exists(t, t.startsWith({str}))", "object.nums.all(n, n >= {int})"),
    "list": ("[{int}, {int}]", "{ilist} + {ilist}", "{str}.split({str})", "{ilist}.map(x, x * {int})",
             "{ilist}.filter(x, x % 2 == 0)", "{ilist}.map(x, x > 0, x - 1)",
             "{str}.findAll({regex})", "{str}.findAll({regex}, {small})",
             "{ilist}.slice({small}, {small})", "{ilist}.distinct()", "{ilist}.sort()",
             "{slist}.sort()", "lists.range({small})", "{ilist}.reverse()", "[[1], [2, 3]].flatten()",
             "[[1], [[2]]].flatten(2)", "{str}.split({str}, {small})", "object.tags",
             "object.nums.map(n, n * {int})", "object.tags.filter(t, t != {str})",
             "[{str}, {str}].sortBy(s, s.size())", "{list}", "object.mixed",
             "{ilist}.transformList(i, v, i * v)", "{map}.transformMapEntry(k, v, {{k: v}})",
             "[?optional.of({int}), ?optional.none()]", "[{int}, ?object.?count]",
             "object.nested.map(k, k).sort()", "{map}.map(k, k).sort()"),
    "map": ("{{'a': {int}, 'b': {int}}}", "object.nested", "{map}", "{{{str}: {str}}}",
            "{{'a': 1, 'a': 2}}", "{ilist}.transformMap(i, v, v * 2)",
            "{{?'a': optional.of({int}), ?'b': optional.none()}}",
            "{map}.transformMap(k, v, v)"),
    "bytes": ("{bytes}", "bytes({str})", "base64.decode('aGVsbG8=')", "base64.decode('!!')",
              "{bytes} + {bytes}"),
    "any": ("{int}", "{uint}", "{double}", "{str}", "{bool}", "{list}", "{map}", "{bytes}",
            "null", "object.{key}", "object['{key}']", "object.nested.{key}"),
}

# Method names filled into library templates.
LIB_HOLES: Final[dict[str, tuple[str, ...]]] = {
    "acc": ("getFullYear", "getMonth", "getDayOfYear", "getDate", "getDayOfMonth", "getDayOfWeek", "getHours",
            "getMinutes", "getSeconds", "getMilliseconds"),
    "dacc": ("getHours", "getMinutes", "getSeconds", "getMilliseconds"),
    "ipacc": ("family", "isUnspecified", "isLoopback", "isLinkLocalMulticast", "isLinkLocalUnicast",
              "isGlobalUnicast"),
    "cidracc": ("prefixLength", "ip", "masked"),
    "urlacc": ("getScheme", "getHost", "getHostname", "getPort", "getEscapedPath", "getQuery"),
}

TYPENAMES: Final = ("int", "uint", "double", "string", "bool", "list", "map", "bytes",
                    "null_type", "type")

# Top-level families: (name, weight, templates). A template is filled at depth 2.
FAMILIES: Final[tuple[tuple[str, int, tuple[str, ...]], ...]] = (
    ("field", 6, ("object.{key}", "object['{key}']", "object.nested.{key}", "object.nested.inner.leaf",
                  "object.{key}.{key}", "object[{str}]", "object.nums[{small}]",
                  "object.tags[{int}]", "object.nested['inner']['leaf']")),
    ("has", 4, ("has(object.{key})", "has(object.nested.{key})", "has(object.nested.inner.leaf)",
                "has(object.{key}.{key})", "has({map}.a)", "'{key}' in object")),
    ("arith.int", 8, (*tuple(TEMPLATES["int"][:6]), "{int} + {int} * {int}")),
    ("arith.uint", 4, TEMPLATES["uint"][:5]),
    ("arith.double", 4, TEMPLATES["double"][:5]),
    ("arith.dyn", 4, ("object.{key} + {int}", "object.{key} * {double}", "object.{key} - object.{key}",
                      "object.count / object.count", "object.big * 2", "object.{key} + {str}",
                      "object.ratio + object.count", "-object.{key}")),
    ("compare", 8, (*TEMPLATES["bool"][:13], "{int} == {double}", "{uint} == {double}", "{int} < {uint}", "{double} > {uint}", "object.{key} == object.{key}", "object.{key} < {int}", "object.{key} == {str}", "dyn({any}) == dyn({any})")),
    ("logic", 4, ("{bool} && {bool}", "{bool} || {bool}", "!{bool}",
                  "object.{key} || {bool}", "{bool} && object.{key}",
                  "(1 / 0 == 1) || {bool}", "{bool} && (1 / 0 == 1)")),
    ("ternary", 4, ("{bool} ? {any} : {any}", "object.flag ? {str} : {str}",
                    "object.{key} ? 1 : 2", "{bool} ? {int} : {str}")),
    ("string.fn", 12, (*TEMPLATES["str"][6:22], "{str}.contains({str})", "{str}.startsWith({str})", "{str}.endsWith({str})", "size({str})", "{str}.indexOf({str}, {small})", "{str}.lastIndexOf({str}, {small})", "{str}.split({str})", "{str}.trim()")),
    ("string.format", 3, ("'%s-%d'.format([{str}, {int}])", "'%d'.format([{str}])",
                          "'%.2f|%x|%o|%b|%e'.format([{double}, {int}, {int}, {int}, {double}])",
                          "'%s'.format([{list}])", "'%s'.format([{map}])", "'%x'.format([{str}])",
                          "'%s %s'.format([{any}])", "'%.3f'.format([{int}])")),
    ("literal", 5, ("[{int}, {int}]", "[{int}, {str}]", "{{'a': {int}, 'b': {str}}}", "{map}",
                    "{list}", "[{any}, {any}]", "{{{int}: 1, {str}: 2}}", "{{'a': 1, 'a': 2}}",
                    "{list}[{int}]", "{map}[{str}]", "{map}['a']", "[{list}, {list}]")),
    ("macro", 10, ("{ilist}.all(x, x > {int})", "{ilist}.exists(x, x == {int})",
                   "{ilist}.exists_one(x, x < {int})", "{ilist}.map(x, x * {int})",
                   "{ilist}.filter(x, x % 2 == 0)", "{ilist}.map(x, x > 0, x - 1)",
                   "{map}.all(k, k != '')", "{map}.exists(k, k == 'a')", "{map}.map(k, k)",
                   "object.nums.filter(n, n > {int})", "object.tags.map(t, t + {str})",
                   "object.all(k, k != 'x')", "{list}.all(x, x)", "[1, 0].all(x, 1 / x > 0)",
                   "[0, 1].exists(x, 1 / x == 1)", "object.nums.map(n, n * n)",
                   "{ilist}.map(x, {ilist}.map(y, x + y))",
                   "cel.bind(v, {int}, v * v)", "cel.bind(s, {str}, s + s)")),
    ("two_var", 5, ("{ilist}.all(i, v, i <= v)", "{ilist}.exists(i, v, v == i)",
                    "{map}.all(k, v, v != 0)", "{map}.exists_one(k, v, k == 'a')",
                    "{ilist}.transformList(i, v, i * v)", "{ilist}.transformList(i, v, v > 1, v)",
                    "{ilist}.transformMap(i, v, v * 2)", "{map}.transformMapEntry(k, v, {{v: k}})",
                    "object.nums.all(i, v, v > i)", "{map}.exists_one(k, v, v == 1)",
                    "{ilist}.existsOne(i, v, v > i)", "object.nested.transformMap(k, v, k)")),
    ("conversion", 8, ("int({any})", "uint({any})", "double({any})", "string({any})",
                       "bool({str})", "bytes({str})", "dyn({any})", "type({any})",
                       "int({str})", "int({double})", "uint({double})", "double({str})",
                       "string({double})", "int(object.{key})", "string(object.{key})",
                       "double(object.{key})", "type(object.{key})", "int('9223372036854775808')",
                       "int(9.3e18)", "int(-9.3e18)", "uint(-1)", "uint(-0.5)", "int(1e100)",
                       "string(b'\\xff')", "double('1e400')", "int(' 1')", "int('+1')",
                       "int('0x1f')", "string(-0.0)", "string(1e21)", "string(123456789.0)",
                       "string(0.000001)", "string(1e-7)", "type(type(1))", "int(timestamp('2024-01-01T00:00:00Z'))")),
    ("regex.go", 5, ("'abc'.matches({goregex})", "object.name.matches({goregex})",
                     "object.name.find({goregex})", "object.name.findAll({goregex})",
                     "'xyz'.matches({goregex} + '')", "object.name.matches({goregex} + '')",
                     "'h\u00e9llo 123'.findAll({goregex} + '', 3)", "matches(object.name, {goregex})",
                     "[{goregex}, {goregex}].exists(p, object.name.matches(p))",
                     "object.tags.exists(t, t.matches({goregex} + ''))")),
    ("numeric.edge", 4, ("{edge} < {edge}", "{edge} <= {edge}", "{edge} > {edge}", "{edge} >= {edge}",
                         "dyn({edge}) == dyn({edge})", "dyn({edge}) != dyn({edge})",
                         "[dyn({edge}), dyn({edge})].max()", "[dyn({edge}), dyn({edge})].min()",
                         "dyn({edge}) in [{edge}]", "dyn({edge}) in [{edge}, {edge}]",
                         "dyn({edge}) in [dyn({edge}), dyn({edge})]",
                         "[dyn({edge})] == [dyn({edge})]", "{{'k': dyn({edge})}} == {{'k': dyn({edge})}}",
                         "[dyn({edge}), dyn({edge})].isSorted()", "[dyn({edge}), dyn({edge})].indexOf(dyn({edge}))",
                         "{{9223372036854775807: 'a', 1: 'b'}}[?dyn({edge})]")),
    ("size", 4, ("size({any})", "size({str})", "size({list})", "size({map})", "size({bytes})",
                 "size(object)", "size(object.{key})", "{str}.size()", "{list}.size()")),
    ("regex", 5, ("{str}.matches({regex})", "{str}.find({regex})", "{str}.findAll({regex})",
                  "{str}.findAll({regex}, {small})", "matches({str}, {regex})",
                  "object.name.matches({regex})")),
    ("library.quantity", 6, ("quantity({qty})", "isQuantity({qty})",
                             "quantity({qty}).isGreaterThan(quantity({qty}))",
                             "quantity({qty}).compareTo(quantity({qty}))",
                             "quantity({qty}).add(quantity({qty}))", "quantity({qty}).add({int})",
                             "quantity({qty}).sub({int})", "quantity({qty}).asInteger()",
                             "quantity({qty}).asApproximateFloat()", "quantity({qty}).sign()",
                             "quantity({qty}).isInteger()", "quantity({qty}) == quantity({qty})",
                             "quantity(object.mem)")),
    ("library.semver", 4, ("semver({semver})", "isSemver({semver})", "isSemver({semver}, true)",
                           "semver({semver}, true)", "semver({semver}).major()",
                           "semver({semver}).minor()", "semver({semver}).patch()",
                           "semver({semver}).isGreaterThan(semver({semver}))",
                           "semver({semver}).compareTo(semver({semver}))",
                           "semver(object.version)")),
    ("library.ip", 4, ("ip({ipstr})", "isIP({ipstr})", "ip({ipstr}).family()",
                       "ip({ipstr}).isUnspecified()", "ip({ipstr}).isLoopback()",
                       "ip({ipstr}).isGlobalUnicast()", "ip.isCanonical({ipstr})",
                       "cidr({cidrstr})", "isCIDR({cidrstr})", "cidr({cidrstr}).prefixLength()",
                       "cidr({cidrstr}).ip()", "cidr({cidrstr}).masked()",
                       "cidr({cidrstr}).containsIP({ipstr})", "ip(object.ip)")),
    ("library.url", 2, ("url({urlstr})", "isURL({urlstr})", "url({urlstr}).getHost()",
                        "url({urlstr}).getPort()", "url({urlstr}).getQuery()",
                        "url({urlstr}).getHostname()")),
    ("library.lists", 6, ("{ilist}.sum()", "{ilist}.min()", "{ilist}.max()", "{ilist}.isSorted()",
                          "{slist}.isSorted()", "{ilist}.indexOf({int})", "{slist}.lastIndexOf({str})",
                          "{ilist}.slice({small}, {small})", "[[1], [2, 3]].flatten()",
                          "{ilist}.distinct()", "{ilist}.sort()", "{slist}.sort()", "lists.range({small})",
                          "{ilist}.reverse()", "[1.5, 0.5].sum()", "[1u, 2u].max()", "[].sum()",
                          "{list}.sum()", "object.nums.sum()", "object.tags.sortBy(t, t)")),
    ("library.math", 3, ("math.greatest({int}, {int})", "math.least({double}, {int})",
                         "math.ceil({double})", "math.round({double})", "math.abs({int})",
                         "math.sign({double})", "math.bitXor({int}, {int})", "math.sqrt({int})",
                         "math.isFinite({double})", "math.greatest({list})")),
    ("library.sets", 2, ("sets.contains({list}, {list})", "sets.intersects({ilist}, {ilist})",
                         "sets.equivalent({slist}, {slist})")),
    ("library.strings", 3, ("strings.quote({str})", "{str}.reverse()", "{slist}.join({str})",
                            "base64.encode({bytes})", "base64.decode('aGVsbG8=')",
                            "{str}.charAt({small})", "{str}.upperAscii()")),
    ("optional", 5, ("object.?{key}", "object.?{key}.orValue({any})", "optional.of({any})",
                     "optional.none()", "optional.ofNonZeroValue({any})", "object.?nested.?inner.?leaf",
                     "[1, 2][?{small}]", "{map}[?{str}]", "object.?{key}.hasValue()",
                     "optional.of({int}).value()", "optional.none().value()",
                     "object.?{key}.or(optional.of({int}))", "[?object.?{key}]",
                     "{{?'x': object.?{key}}}", "object.?{key}.?{key}", "{ilist}[?{int}]",
                     "optional.ofNonZeroValue(object.{key})", "object.nums[?{small}].orValue(-1)",
                     "object.?nested.?inner.orValue({{}})", "[?[1, 2, 3][?{small}], ?optional.none()]",
                     "optional.of({int}).or(object.?count)", "object.?count.value() + {int}",
                     "optional.none().orValue({int})", "type(object.?{key}) == optional_type",
                     "object.?{key} == optional.none()", "object.?tags[{small}]", "{map}.?a",
                     "object.?{key}.orValue(1 / 0)", "optional.of({list}).value()",
                     "object.?nested.inner", "{{?{str}: optional.of({int}), 'k': {int}}}")),
    ("typing", 5, ("[{int}, {double}]", "[{str}, {any}]", "[dyn({int}), dyn({str})]", "[[], [{int}]]",
                   "[{list}, []]", "{{'a': {int}, 'b': object.{key}}}", "[{int}, null]",
                   "{int} == {double}", "{uint} != {int}", "[{int}] == [{double}]", "--{int}",
                   "- {int}", "--9223372036854775808", "- 9223372036854775808", "---{int}",
                   "[{int}, {int},]", "{{'a': {int},}}", "{{{str}: 1, {str}: 2}}",
                   "object.nums.map(x, {{x: 1, 1: 2}})", "has(object.{key}.{key})",
                   "has({{1: 'a'}}.f)", "semver({semver}) == null", "quantity({qty}) == dyn({str})",
                   "{int} in [{double}]", "{{1: 'a'}}[{uint}]", "dyn({int}) == {double}")),
    ("folding", 4, ("false ? {int} : int({str})", "true ? {uint} : uint({int})",
                    "[{str}].map(s, uint({int}))", "int({str}) + {int}", "dyn(uint({int}))",
                    "{int} in [1, 2, 3]", "object.count in [1, 2, 3]", "string({bytes})",
                    "double({str}) > 0.0", "[int({str}), {int}]", "type(int({str}))",
                    "object.nums.exists(n, n == int({str}))", "'a' in ['a', 'b']")),
    ("time", 4, ("timestamp('2024-01-02T03:04:05Z')", "duration('1h30m')",
                 "timestamp('2024-01-02T03:04:05Z') + duration('{small}h')",
                 "timestamp('2024-01-02T03:04:05Z').getFullYear()",
                 "timestamp('2024-01-02T03:04:05Z').getDayOfWeek()",
                 "duration('90s').getSeconds()", "duration('{small}h') < duration('61m')",
                 "timestamp('bad')", "duration('1x')", "timestamp(0)", "timestamp(object.name)",
                 "timestamp('2024-01-02T03:04:05Z') - timestamp('2024-01-01T00:00:00Z')",
                 "timestamp('9999-12-31T23:59:59Z') + duration('1s')",
                 "timestamp('2024-01-02T03:04:05Z').getHours('America/New_York')")),
    # Libraries of the Kubernetes environment over data (dynamically typed, so errors surface
    # at run time, and no constant folding hides the runtime cost upstream).
    ("lib.time", 5, ("timestamp(object.ts).{acc}()", "timestamp(object.ts).{acc}({tz})",
                     "timestamp(object.ts).{acc}(object.tz)", "duration(object.dur).{dacc}()",
                     "string(timestamp(object.ts))", "string(duration(object.dur))", "int(timestamp(object.ts))",
                     "int(duration(object.dur))", "timestamp(object.ts) + duration(object.dur)",
                     "duration(object.dur) + timestamp(object.ts)", "timestamp(object.ts) - duration(object.dur)",
                     "timestamp(object.ts) - timestamp({tsstr})", "duration(object.dur) - duration({durstr})",
                     "duration(object.dur) + duration(object.dur)", "timestamp(object.ts) < timestamp({tsstr})",
                     "duration(object.dur) >= duration({durstr})", "timestamp(object.ts) == timestamp({tsstr})",
                     "timestamp(object.count)", "timestamp(object.ts).getDayOfWeek() == {small}",
                     "timestamp({tsstr}).{acc}({tz})", "duration({durstr}).{dacc}()",
                     "[duration(object.dur), duration({durstr})].sort()", "type(timestamp(object.ts))",
                     "dyn(duration(object.dur)) + dyn(object.count)", "timestamp(object.ts) + duration({durstr})")),
    ("lib.net", 4, ("ip(object.ip).{ipacc}()", "string(ip(object.ip))", "isIP(object.ip)", "ip.isCanonical(object.ip)",
                    "cidr(object.cidr).{cidracc}()", "string(cidr(object.cidr).masked())", "isCIDR(object.cidr)",
                    "cidr(object.cidr).containsIP(object.ip)", "cidr(object.cidr).containsIP(ip(object.ip))",
                    "cidr(object.cidr).containsCIDR(object.cidr)", "cidr({cidrstr}).containsIP(object.ip)",
                    "ip(object.ip) == ip({ipstr})", "cidr(object.cidr) == cidr({cidrstr})",
                    "string(cidr(object.cidr).ip())", "ip(object.ip).family() == 6")),
    ("lib.url", 3, ("url(object.url).{urlacc}()", "isURL(object.url)", "url(object.url).getQuery()",
                    "url(object.url) == url({urlstr})", "url({urlstr}).{urlacc}()", "url(object.name).getHost()")),
    ("lib.format", 4, ("{fmt}.format(object.args)", "{fmt}.format([object.{key}])", "{fmt}.format([{any}])",
                       "'%s'.format([object])", "{fmt}.format([object.ratio, object.name])",
                       "'%s'.format([object.nums])", "'%s'.format([object.nested])", "strings.quote(object.name)",
                       "strings.quote({str})", "'%d and %s'.format(object.args)", "{fmt}.format(object.nums)")),
    ("lib.offsets", 2, ("object.name.indexOf({str}, {small})", "object.name.lastIndexOf({str}, {small})",
                        "{str}.indexOf(object.name, object.count)", "object.name.lastIndexOf('', object.count)",
                        "object.name.indexOf('', {int})")),
    ("lib.quantity", 2, ("quantity(object.mem).isInteger()", "quantity(object.mem).asInteger()",
                         "quantity(object.mem).add({int}).isInteger()", "quantity({qty}).sub(quantity(object.mem)).isInteger()",
                         "quantity(object.mem).add(quantity({qty})).asInteger()")),
    ("ill_typed", 6, ("1 + 'a'", "size(1)", "{str}.contains({int})", "{int} && true",
                      "'a' < 1", "{int} + {uint}", "{int} + {double}", "nosuchfn(1)",
                      "{str}.nosuch()", "[1, 'a']", "{{'a': 1, 'b': 'x'}}", "!{int}",
                      "{int} ? 1 : 2", "true ? 1 : 'a'", "object.{key}()", "int()",
                      "{list}.all(x)", "{int}.all(x, true)", "{bytes} + {str}", "-{str}",
                      "{int} in {str}", "has(object)", "has(1.a)", "{str}[0]",
                      "type(1) + 1", "quantity(1)", "semver(1)", "{map}.x.y",
                      "{ilist}.map(x, y)", "{int}.size()")),
    ("syntax", 3, ("1 +", "(1", "object.", "'unterminated", "1 ? 2", "[1, 2", "a.b.c(", "}",
                   "1 2", "object..x", "!", "'a' 'b'", "0x", "1.e", "in", "has()", "",
                   "object.\u00e9", "'\\q'", "b'\\u0041'", "1u - ", "[[[[[[[[[[1]]]]]]]]]]",
                   "x.all(1, true)", "cel.bind(1, 2, 3)")),
    ("cost", 2, ("lists.range(1000).all(i, lists.range(1000).all(j, i + j >= 0))",
                 "lists.range(20).map(i, lists.range(20).map(j, 'x' * 1))",
                 "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(a, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(b, "
                 "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(c, a + b + c > 0)))",
                 "lists.range(200).map(i, 'abcdefghij'.repeat(10)).join('').size()",
                 "lists.range(5000).filter(i, string(i).matches('7$')).size()",
                 "'{str}'.size() + lists.range(100).map(i, i * i).sum()",
                 "object.tags.all(a, object.tags.all(b, object.tags.all(c, a + b + c != '')))")),
)

HOLE: Final = re.compile(r"\{\{|\}\}|\{(int|small|uint|double|str|bool|list|ilist|slist|map|bytes|regex|goregex|edge|qty|semver|ipstr|cidrstr|urlstr|tsstr|durstr|tz|fmt|acc|dacc|ipacc|cidracc|urlacc|any|key|typename)\}")


class Generator:
    """Deterministic: the same seed yields the same cases, byte for byte."""

    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)

    # ------------------------------------------------------------------ data
    def _value(self, key: str, depth: int = 0) -> Any:
        r = self.r
        if r.random() < 0.08:  # a value of the "wrong" type
            return r.choice(["x", 1, 2.5, True, None, [1], {"k": 1}, ""])
        if key == "name":
            return r.choice(["alpha", "Beta-2", "", "h\u00e9llo", "a,b", "x" * r.randint(0, 40), "10"])
        if key == "count":
            return r.choice([0, 1, 3, -2, 42, 1000, INT64_MAX, -INT64_MAX - 1])
        if key == "ratio":
            return r.choice([0.25, 0.5, -1.5, 1e10, 3.0, 0.1])
        if key == "flag":
            return r.choice([True, False])
        if key == "tags":
            return [r.choice(["a", "b", "c", "gpu", "x,y", ""]) for _ in range(r.randint(0, 5))]
        if key == "nums":
            return [r.randint(-5, 20) for _ in range(r.randint(0, 6))]
        if key == "nested":
            inner: dict[str, Any] = {"leaf": r.choice(["x", "y", ""]), "n": r.randint(0, 9)}
            out: dict[str, Any] = {"inner": inner}
            if r.random() < 0.5:
                out["name"] = "inner-name"
            if r.random() < 0.5 and depth < 2:
                out["count"] = self._value("count", depth + 1)
            return out
        if key == "empty":
            return r.choice(["", [], {}, 0])
        if key == "big":
            return r.choice([INT64_MAX, -INT64_MAX - 1, 2**62, 1.7e308])
        if key == "mem":
            return r.choice(["1Gi", "500Mi", "1.5", "abc", "100m"])
        if key == "version":
            return r.choice(["1.2.3", "1.10.0", "v2", "0.0.1-alpha"])
        if key == "ip":
            return r.choice(["10.0.0.1", "::1", "bad", "fe80::1", "224.0.0.251", "255.255.255.255", "0.0.0.0",
                             "2001:DB8::1", "::ffff:1.2.3.4", "169.254.1.1", "ff02::1", "010.1.1.1"])
        if key == "cidr":
            return r.choice(["10.0.0.0/8", "::/0", "10.1.2.3/16", "2001:db8::1/48", "1.2.3.4/33",
                             "192.168.0.0/016", "fe80::/10"])
        if key == "nul":
            return None
        if key == "ts":
            return r.choice(["2024-01-02T03:04:05Z", "2024-03-10T07:30:00.5+05:30", "1970-01-01T00:00:00Z",
                             "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "2024-13-01T00:00:00Z",
                             "2024-02-29T12:00:00-08:00", "bad"])
        if key == "dur":
            return r.choice(["1h30m", "-90s", "1.5ms", "0", "2562047h", "1x", "100ns", "3\u00b5s"])
        if key == "tz":
            return r.choice(["America/New_York", "Australia/Lord_Howe", "UTC", "-09:30", "Nowhere/City"])
        if key == "url":
            return r.choice(["https://example.com:8443/a/b?x=1&x=2&y=%zz#frag", "http://[fe80::1%25eth0]:8080/p",
                             "/just/a/path?q", "mailto:someone@example.com", "http://h:bad/", "*",
                             "HTTP://User:P%40ss@Example.COM/a%2Fb c", "relative/path", ""])
        if key == "args":
            return r.choice([[], ["x"], [1, "y"], [2.5, True, None], [[1, 2], {"k": "v"}], ["NaN", 1e21],
                             [-255, "h\u00e9llo"]])
        if key == "mixed":
            return [1, "a", 2.5, True, None, {"k": [1]}][: r.randint(0, 6)]
        return "unexpected"

    def object(self) -> dict[str, Any]:
        return {k: self._value(k) for k in OBJECT_KEYS if k != "missing" and self.r.random() < 0.8}

    def device(self) -> dict[str, Any]:
        r = self.r
        attrs: dict[str, Any] = {}
        if r.random() < 0.9:
            attrs["model"] = {"string": r.choice(["a100", "h100", "t4", ""])}
        if r.random() < 0.9:
            attrs["cores"] = {"int": r.choice([0, 8, 108, 132, -1])}
        if r.random() < 0.8:
            attrs["sharing"] = {"bool": r.choice([True, False])}
        if r.random() < 0.8:
            attrs["driverVersion"] = {"version": r.choice(["1.2.3", "1.10.0", "2.0.0-rc.1"])}
        if r.random() < 0.5:
            attrs["other.example.com/zone"] = {"string": r.choice(["a", "b"])}
        caps: dict[str, Any] = {}
        if r.random() < 0.9:
            caps["memory"] = {"value": r.choice(["40Gi", "80Gi", "16G", "1500Mi"])}
        if r.random() < 0.5:
            caps["other.example.com/slots"] = {"value": str(r.randint(1, 16))}
        dev: dict[str, Any] = {"driver": r.choice(["gpu.example.com", "nic.example.com"]),
                               "attributes": attrs, "capacity": caps}
        if r.random() < 0.5:
            dev["allowMultipleAllocations"] = r.choice([True, False])
        return dev

    # ----------------------------------------------------------- expressions
    def fill(self, template: str, depth: int) -> str:
        def one(m: re.Match[str]) -> str:
            if m.group(1) is None:  # an escaped brace of a map literal
                return m.group(0)[0]
            return self.hole(m.group(1), depth)

        return HOLE.sub(one, template)

    def hole(self, kind: str, depth: int) -> str:
        r = self.r
        if kind == "key":
            return r.choice(OBJECT_KEYS)
        if kind == "typename":
            return r.choice(TYPENAMES)
        if kind in LIB_HOLES:
            return r.choice(LIB_HOLES[kind])
        if kind in ("small", "regex", "goregex", "edge", "qty", "semver", "ipstr", "cidrstr", "urlstr", "tsstr", "durstr", "tz",
                    "fmt"):
            return r.choice(ATOMS[kind])
        if kind == "any":
            kind = r.choice(["int", "uint", "double", "str", "bool", "list", "map", "bytes"])
            if r.random() < 0.2:
                return self.fill(r.choice(TEMPLATES["any"][8:]), 0)
        if r.random() < 0.05:  # a dynamically typed field where a typed value was wanted
            return "object." + r.choice(OBJECT_KEYS)
        tkind = {"ilist": "list", "slist": "list"}.get(kind, kind)
        if depth <= 0 or r.random() < 0.45 or tkind not in TEMPLATES:
            atoms = ATOMS.get(kind) or ATOMS["int"]
            return r.choice(atoms)
        sub = self.fill(r.choice(TEMPLATES[tkind]), depth - 1)
        return f"({sub})"

    def object_case(self) -> CelCase:
        r = self.r
        weights = [f[1] for f in FAMILIES]
        i = r.choices(range(len(FAMILIES)), weights)[0]
        family, _, templates = FAMILIES[i]
        expr = self.fill(r.choice(templates), r.choice([1, 1, 2, 2, 3]))
        return CelCase(family, "object", expr, self.object())

    def device_case(self) -> CelCase:
        r = self.r
        domain = r.choice(["gpu.example.com", "nic.example.com", "other.example.com", "absent.example.com"])
        attr = r.choice(["model", "cores", "sharing", "driverVersion", "zone", "missing"])
        templates = (
            "device.driver == '{d}'",
            "device.attributes['{d}'].{a} == 'a100'",
            "device.attributes['{d}'].{a} > 100",
            "device.attributes['{d}'].{a}",
            "has(device.attributes['{d}'].{a})",
            "'{a}' in device.attributes['{d}']",
            "'{d}' in device.attributes",
            "device.attributes['{d}'].driverVersion.isGreaterThan(semver('1.5.0'))",
            "device.capacity['{d}'].memory.compareTo(quantity('32Gi')) >= 0",
            "device.capacity['{d}'].memory.isLessThan(quantity('20Gi'))",
            "device.capacity['{d}'].memory == quantity('40960Mi')",
            "device.allowMultipleAllocations",
            "device.attributes['{d}'].all(k, k != '')",
            "size(device.attributes['{d}']) > 1",
            "device.attributes['{d}'].{a}.startsWith('a')",
            "cel.bind(dev, device.attributes['{d}'], dev.model == 'h100' || dev.cores >= 108)",
            "device.attributes.exists(d, d.endsWith('.com'))",
            "device.driver",
            "device.attributes['{d}'].?{a}.orValue('none') == 'none'",
            "device.nope == 1",
            "cel.bind(x, device.attributes['{d}'], x.{a} == 'a100')",
            "cel.bind(n, 100, device.attributes['{d}'].cores > n)",
            "cel.bind(n, device.attributes['{d}'].cores, cel.bind(m, n * 2, m > 100))",
            "device.attributes['{d}'].?{a}.hasValue()",
            "device.capacity['{d}'].?memory.orValue(quantity('0')).isLessThan(quantity('1Gi'))",
            "device.driver.size()",
            "device.attributes['{d}'].?{a}",
            "cel.bind(x, 1)",
        )
        expr = r.choice(templates).replace("{d}", domain).replace("{a}", attr)
        return CelCase("device", "device", expr, self.device())


def generate(seed: int, n_object: int, n_device: int) -> list[CelCase]:
    """``n_object`` object cases and ``n_device`` selector cases from ``seed``."""
    g = Generator(seed)
    cases = [g.object_case() for _ in range(n_object)]
    cases += [g.device_case() for _ in range(n_device)]
    return cases
