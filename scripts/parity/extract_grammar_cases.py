#!/usr/bin/env python3
"""Carries llama.cpp's grammar test cases over as data (tests/data/grammar/*.json).

Reads the peer's tests/test-grammar-parser.cpp, test-grammar-integration.cpp and
test-json-schema-to-grammar.cpp and keeps only their inputs and expected verdicts: which
grammars parse, which strings a grammar or schema accepts, which schemas convert. Our own
test code (tests/grammar/) reads the JSON. Run once by hand; never in CI:
  scripts/parity/extract_grammar_cases.py ~/.cache/fucina-peers/llama.cpp tests/data/grammar
"""
import json
import re
import sys
from pathlib import Path

SIMPLE_ESC = {'n': '\n', 't': '\t', 'r': '\r', '\\': '\\', '"': '"', "'": "'", '0': '\0', 'a': '\a',
              'b': '\b', 'f': '\f', 'v': '\v', '?': '?'}


def read_string(src, i):
    """Parses adjacent C++ string literals at src[i:]; returns (bytes, next index)."""
    out = bytearray()
    found = False
    i = skip_ws(src, i)
    while True:
        i = skip_ws(src, i, commas=False)
        if src.startswith('R"', i):
            delim_end = src.index('(', i)
            delim = src[i + 2:delim_end]
            end = src.index(')' + delim + '"', delim_end)
            out += src[delim_end + 1:end].encode()
            i = end + len(delim) + 2
            found = True
        elif src.startswith('"', i) or src.startswith('u8"', i):
            i = src.index('"', i) + 1
            while src[i] != '"':
                c = src[i]
                if c == '\\':
                    e = src[i + 1]
                    if e == 'x':
                        m = re.match(r'[0-9a-fA-F]+', src[i + 2:])
                        out.append(int(m.group(0), 16) & 0xFF)
                        i += 2 + len(m.group(0))
                        continue
                    if e in 'uU':
                        n = 4 if e == 'u' else 8
                        out += chr(int(src[i + 2:i + 2 + n], 16)).encode()
                        i += 2 + n
                        continue
                    if e in '01234567' and e != '0' or src[i + 1:i + 3].isdigit():
                        m = re.match(r'[0-7]{1,3}', src[i + 1:])
                        out.append(int(m.group(0), 8))
                        i += 1 + len(m.group(0))
                        continue
                    out += SIMPLE_ESC[e].encode()
                    i += 2
                    continue
                out += c.encode()
                i += 1
            i += 1
            found = True
        else:
            if not found:
                raise ValueError(f'no string literal at {src[i:i + 40]!r}')
            return bytes(out), i


def skip_ws(src, i, commas=True):
    seps = ' \t\r\n,' if commas else ' \t\r\n'
    while True:
        while i < len(src) and src[i] in seps:
            i += 1
        if src.startswith('//', i):
            i = src.index('\n', i)
        elif src.startswith('/*', i):
            i = src.index('*/', i) + 2
        else:
            return i


def read_string_list(src, i):
    i = skip_ws(src, i)
    assert src[i] == '{', src[i:i + 40]
    i += 1
    items = []
    while True:
        i = skip_ws(src, i)
        if src[i] == '}':
            return items, i + 1
        s, i = read_string(src, i)
        items.append(s)


def text(b):
    return b.decode('utf-8', errors='surrogateescape')


def as_json_text(b):
    """A test string: UTF-8 text when it is, else the bytes as latin-1 code points tagged."""
    try:
        return {'text': b.decode('utf-8')}
    except UnicodeDecodeError:
        return {'hex': b.hex()}


def integration(src):
    cases = []
    for m in re.finditer(r'\btest_(grammar|schema)\(', src):
        if src[m.start() - 5:m.start()] == 'void ':
            continue
        i = m.end()
        desc, i = read_string(src, i)
        body, i = read_string(src, i)
        if 'token(' in src[i:src.index(');\n', i)]:  # token-id inputs: <[id]> references
            cases.append({'kind': m.group(1), 'name': text(desc), m.group(1): text(body),
                          'skip': 'token references (<[id]>) are outside the GBNF subset we support'})
            continue
        passing, i = read_string_list(src, i)
        failing, i = read_string_list(src, i)
        cases.append({'kind': m.group(1), 'name': text(desc), m.group(1): text(body),
                      'pass': [as_json_text(s) for s in passing], 'fail': [as_json_text(s) for s in failing]})
    return cases


def parser_cases(src):
    cases = []
    for m in re.finditer(r'\bverify_(parsing|failure)\(R"', src):
        g, _ = read_string(src, m.end() - 2)
        case = {'grammar': text(g), 'valid': m.group(1) == 'parsing'}
        if re.search(r'!?<\[\d+\]>', case['grammar']):
            case['skip'] = 'token references (<[id]>) are outside the GBNF subset we support'
        cases.append(case)
    return cases


def failure_cases(src):
    """The integration test's test_failure_* and root-symbol checks: grammars that must not build."""
    cases = []
    for fn in re.finditer(r'static void (test_failure_\w+|test_custom_root_symbol_check)\(\) \{(.*?)\n\}', src, re.S):
        body = fn.group(2)
        for m in re.finditer(r'const std::string (\w+) =\s*R"', body):
            g, _ = read_string(body, m.end() - 2)
            if fn.group(1) == 'test_failure_missing_root_symbol':
                cases.append({'grammar': text(g), 'root': 'nonexistent', 'valid': False})
            elif fn.group(1) == 'test_custom_root_symbol_check':
                cases.append({'grammar': text(g), 'root': 'root', 'valid': False})
                cases.append({'grammar': text(g), 'root': 'foobar', 'valid': True})
            else:
                cases.append({'grammar': text(g), 'valid': False})
    return cases


def schema_cases(src):
    cases = []
    for m in re.finditer(r'\btest\(\{\s*(SUCCESS|FAILURE),', src):
        i = m.end()
        name, i = read_string(src, i)
        schema, i = read_string(src, i)
        grammar, i = read_string(src, i)
        cases.append({'name': text(name), 'status': m.group(1).lower(), 'schema': text(schema),
                      'llama_grammar': text(grammar)})
    return cases


def main():
    peer, out = Path(sys.argv[1]), Path(sys.argv[2])
    tests = peer / 'tests'
    read = lambda n: (tests / n).read_text()
    for name, data in [('integration.json', integration(read('test-grammar-integration.cpp'))),
                       ('parser.json', parser_cases(read('test-grammar-parser.cpp')) +
                        failure_cases(read('test-grammar-integration.cpp'))),
                       ('json_schema.json', schema_cases(read('test-json-schema-to-grammar.cpp')))]:
        (out / name).write_text(json.dumps(data, indent=1, ensure_ascii=False) + '\n')
        print(f'{name}: {len(data)} cases')


if __name__ == '__main__':
    main()
