#!/usr/bin/env python3
"""compare-summary.py DIR: the tables of one scripts/h200-compare.sh run, from its logs
(DIR: the unpacked h2c-logs.tgz): pp512/tg128 against llama-bench, the nt curves,
specbench's depths and curve, the serving rows (with each minfer server's batch metrics
where the run kept them) and the CUDA test binary's failures."""
import collections, glob, json, os, sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def llama(path):
    out = {}
    for r in load(path) or []:
        k = 'pp%d' % r['n_prompt'] if r['n_gen'] == 0 else 'tg%d' % r['n_gen']
        out[k] = (r['avg_ts'], max(r['samples_ts']))
    return out


def minfer(path):
    return {r['test']: (r['avg_ts'], max(r['samples_ts'])) for r in load(path) or []}


def main(d):
    print('file: llama pp512 mean; best | minfer pp512 | x mean / x best | llama tg128 best | minfer tg128 | x best')
    for p in sorted(glob.glob(os.path.join(d, 'lb-*-[ab].json'))):
        name = os.path.basename(p)[3:-5]
        l, m = llama(p), minfer(os.path.join(d, 'mf-%s.json' % name))
        if 'pp512' in l and 'pp512' in m and 'tg128' in l and 'tg128' in m:
            print('%s: %.0f; %.0f | %.0f | %.2f / %.2f | %.0f | %.1f | %.2f' % (
                name, l['pp512'][0], l['pp512'][1], m['pp512'][0], m['pp512'][0] / l['pp512'][0],
                m['pp512'][0] / l['pp512'][1], l['tg128'][1], m['tg128'][0], m['tg128'][0] / l['tg128'][1]))
    l, m = llama(os.path.join(d, 'lb-pp4096.json')), minfer(os.path.join(d, 'mf-pp4096.json'))
    if 'pp4096' in l and 'pp4096' in m:
        print('pp4096: llama %.0f, minfer %.0f (%.2fx)' % (l['pp4096'][0], m['pp4096'][0], m['pp4096'][0] / l['pp4096'][0]))
    for lb, mf in [('lb-curve.json', 'mf-curve.json'), ('lb-curve-s7-q40.json', 'mf-curve-s7-q40.json'),
                   ('lb-curve-s7-q8.json', 'mf-curve-s7-q8.json')]:
        l, m = llama(os.path.join(d, lb)), minfer(os.path.join(d, mf))
        if 'pp1' not in m:
            continue
        print('%s: nt llama best / minfer mean (x), C/C(1)' % mf)
        for k, (v, _) in sorted(m.items(), key=lambda kv: int(kv[0][2:])):
            nt = int(k[2:])
            lv = l.get(k, (0, 0))[1]
            print('  %d: %.0f / %.0f (%s) %.2f' % (nt, lv, v, '%.2f' % (v / lv) if lv else '-', nt / v * m['pp1'][0]))
    sb = load(os.path.join(d, 'mf-specbench.json'))
    if sb:
        print('specbench: depth tokens/s speedup acceptance draft-ms verify-ms identical')
        for r in sb['depths']:
            print('  %s %.1f %.3f %.2f %.2f %.2f %s' % (r['depth'], r['tokens_per_s'], r['speedup'], r['acceptance'],
                                                      r['ms_per_round']['draft'], r['ms_per_round']['verify'],
                                                      r['identical_to_depth0']))
        c = sb.get('verify_cost_ms') or []
        pick = [n for n in (1, 2, 4, 8, 9, 16, 17, 32, 33, 64) if n <= len(c)]
        print('  C_T ms: ' + ', '.join('%d: %.3f (%.2fx)' % (n, c[n - 1], c[n - 1] / c[0]) for n in pick))
        print('  draft step %.3f ms, chain step %.3f ms' % (sb.get('draft_step_ms', 0), sb.get('draft_chain_step_ms', 0)))
    metrics = collections.defaultdict(dict)
    try:
        for line in open(os.path.join(d, 'metrics.txt')):
            f = line.split()
            if len(f) == 3:
                metrics[f[0]][f[1]] = float(f[2])
    except OSError:
        pass
    order = []
    try:
        for line in open(os.path.join(d, 'serve.jsonl')):
            order.append(json.loads(line))
    except OSError:
        pass
    rows = {r['label']: r for r in order}
    if order:
        print('serving: label clients requests errors tok/s [target seqs/forward, draft forwards]')
        T, D = '{model="target"}', '{model="draft"}'
        for r in order:
            name = r['label']
            v = metrics.get(name, {})
            extra = ''
            if v.get('minfer_batch_sequences_count' + T):
                extra = ' [%.2f, %d]' % (v['minfer_batch_sequences_sum' + T] / v['minfer_batch_sequences_count' + T],
                                         v.get('minfer_forward_seconds_count' + D, 0))
            print('  %s %d %d %d %.1f%s' % (name, r['clients'], r['requests'], r['errors'], r['tok_per_s'], extra))
        for c in (1, 2, 4, 8, 16, 32):
            p, s = rows.get('mf-np%d' % c), rows.get('mf-spec-np%d' % c)
            if p and s:
                print('  %d clients: draft / plain %.3f' % (c, s['tok_per_s'] / p['tok_per_s']))
    try:
        fails = [l.strip() for l in open(os.path.join(d, 'cuda-test.log')) if l.startswith('--- FAIL')]
        print('cuda tests: %s' % ('; '.join(fails) if fails else 'no failures'))
    except OSError:
        pass


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit('usage: compare-summary.py DIR (an unpacked h2c-logs.tgz)')
    main(sys.argv[1])
