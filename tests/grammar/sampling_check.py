#!/usr/bin/python3
"""Constrained sampling end to end: `fucina run --json-schema-file` on random-weight models
(whose free output is garbage) at temperature 1 with no truncation, many seeds per schema.
Every output that ends with `stop: eos` must parse as JSON and validate against its schema,
checked by an independent validator (Debian's python3-jsonschema); an output cut by -n must
say `stop: length`. Two vocabularies: the built-in 354-token byte-level SPM one, and Qwen2's
151,936 tokens (copied from ../shared/models/tiny-qwen3-f16.gguf when present), whose tokens
split UTF-8 characters.

usage: sampling_check.py FUCINA_BINARY WORK_DIR [SHARED_DIR]
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import jsonschema

SCHEMAS = {
    'object': {
        'type': 'object',
        'properties': {
            'name': {'type': 'string', 'maxLength': 8},
            'age': {'type': 'integer', 'minimum': 18, 'maximum': 99},
            'score': {'type': 'number'},
            'ok': {'type': 'boolean'},
            'role': {'enum': ['admin', 'user', None, 3]},
        },
        'required': ['name', 'age', 'ok'],
    },
    'array': {'type': 'array', 'items': {'type': 'integer', 'minimum': -5, 'maximum': 5}, 'minItems': 2, 'maxItems': 4},
    'patterns': {
        'type': 'object',
        'properties': {
            'code': {'type': 'string', 'pattern': '^[A-Z]{2}-[0-9]{3}$'},
            'id': {'type': 'string', 'format': 'uuid'},
            'day': {'type': 'string', 'format': 'date'},
            'words': {'type': 'string', 'pattern': '^(ab|c[de]+)?x\\.y$'},
        },
        'required': ['code', 'id', 'day', 'words'],
        'additionalProperties': False,
    },
    'refs_anyof': {
        '$defs': {'leaf': {'type': 'object', 'properties': {'v': {'type': 'integer', 'exclusiveMinimum': 0}}, 'required': ['v']}},
        'type': 'object',
        'properties': {
            'a': {'anyOf': [{'$ref': '#/$defs/leaf'}, {'type': 'null'}]},
            'b': {'type': 'array', 'prefixItems': [{'type': 'string', 'maxLength': 3}, {'const': 'k'}]},
            'c': {'type': ['string', 'integer'], 'maxLength': 4},
        },
        'required': ['a', 'b'],
    },
    'additional': {
        'type': 'object',
        'properties': {'x': {'type': 'integer'}},
        'additionalProperties': {'type': 'boolean'},
        'maxProperties': 8,
    },
}
# maxProperties is ignored by the converter (as llama.cpp ignores it): drop it before
# validating so the check is about what the grammar promises.
IGNORED = {'maxProperties'}


def strip_ignored(schema):
    if isinstance(schema, dict):
        return {k: strip_ignored(v) for k, v in schema.items() if k not in IGNORED}
    if isinstance(schema, list):
        return [strip_ignored(v) for v in schema]
    return schema


def run(cmd):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)


def check_model(fucina, model, seeds, failures, stats):
    validator_cls = jsonschema.Draft202012Validator
    checker = jsonschema.FormatChecker()
    for name, schema in SCHEMAS.items():
        with tempfile.NamedTemporaryFile('w', suffix='.json', delete=False) as f:
            json.dump(schema, f)
            path = f.name
        validator = validator_cls(strip_ignored(schema), format_checker=checker)
        for seed in range(1, seeds + 1):
            r = run([fucina, 'run', model, '-p', 'x', '--json-schema-file', path, '--temp', '1', '--top-k', '0',
                     '--top-p', '1', '--min-p', '0', '--seed', str(seed), '-n', '160', '-t', '1'])
            err = r.stderr.decode(errors='replace')
            stop = re.search(r'stop: (\w[\w ]*)', err)
            tag = f'{os.path.basename(model)} {name} seed {seed}'
            if r.returncode != 0 or not stop:
                failures.append(f'{tag}: exit {r.returncode}: {err.strip()[-300:]}')
                continue
            reason = stop.group(1)
            stats[reason] = stats.get(reason, 0) + 1
            if reason != 'eos':
                if reason != 'length':
                    failures.append(f'{tag}: unexpected stop reason {reason!r}')
                continue
            try:
                value = json.loads(r.stdout.decode('utf-8'))
                validator.validate(value)
            except (UnicodeDecodeError, json.JSONDecodeError, jsonschema.ValidationError) as e:
                failures.append(f'{tag}: output {r.stdout!r} does not validate: {str(e).splitlines()[0]}')
        os.unlink(path)


def main():
    fucina, work = sys.argv[1], sys.argv[2]
    shared = sys.argv[3] if len(sys.argv) > 3 else ''
    os.makedirs(work, exist_ok=True)
    models = []
    byte_model = os.path.join(work, 'byte.gguf')
    r = run([fucina, 'synth', byte_model, '--arch', 'qwen3', '--hidden', '64', '--layers', '2', '--ffn', '128',
             '--ctx', '1024', '--seed', '5'])
    assert r.returncode == 0, r.stderr
    models.append((byte_model, 12))
    qwen_vocab = os.path.join(shared, 'models', 'tiny-qwen3-f16.gguf') if shared else ''
    if qwen_vocab and os.path.exists(qwen_vocab):
        qwen_model = os.path.join(work, 'qwen.gguf')
        r = run([fucina, 'synth', qwen_model, '--arch', 'qwen3', '--hidden', '64', '--layers', '2', '--ffn', '128',
                 '--ctx', '1024', '--seed', '6', '--vocab', qwen_vocab])
        assert r.returncode == 0, r.stderr
        models.append((qwen_model, 4))
    else:
        print('note: ../shared absent, the 151,936-token vocabulary is not exercised')

    failures, stats = [], {}
    for model, seeds in models:
        check_model(fucina, model, seeds, failures, stats)

    # A cut by -n is reported as such, whatever the text so far.
    r = run([fucina, 'run', byte_model, '-p', 'x', '--json-schema', json.dumps(SCHEMAS['object']), '--temp', '1',
             '--seed', '1', '-n', '2'])
    if b'stop: length' not in r.stderr:
        failures.append(f'-n 2 did not report stop: length: {r.stderr!r}')

    total = sum(stats.values())
    print(f'{total} constrained generations: {stats}')
    # Most texts must finish within -n (else the check above would prove little).
    if stats.get('eos', 0) < 0.6 * total:
        failures.append(f'only {stats.get("eos", 0)} of {total} generations completed')
    for f in failures:
        print('FAIL', f)
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
