import json,glob,statistics,sys
runs={}  # (mode)->workload->fig->[values]
def add(p, rename=None):
    d=json.load(open(p))
    for r in d['runs']:
        mode=r['mode'] if not rename else rename
        for ph in r['phases']:
            w=ph['workload']
            for k in ('ops_s','cpu_us_per_op','p99_us','write_amp','steal_ms_per_s'):
                v=ph.get(k)
                if v is None: continue
                runs.setdefault(mode,{}).setdefault(w,{}).setdefault(k,[]).append(v)
base=sys.argv[1] if len(sys.argv)>1 else '.'
for p in sorted(glob.glob(base+'/new-*/report.json')): add(p)
for p in sorted(glob.glob(base+'/old-*/report.json')): add(p,'before:auto')
def med(m,w,k='ops_s'):
    v=runs.get(m,{}).get(w,{}).get(k)
    return statistics.median(v) if v else float('nan')
def span(m,w,k='ops_s'):
    v=runs.get(m,{}).get(w,{}).get(k); return (min(v),max(v),len(v)) if v else None
ws=list(runs['quietkv:auto'].keys())
def table(title, pairs, k='ops_s'):
    print(f'\n### {title} ({k})\n')
    print('| workload | '+' | '.join(f'{a} / {b}' for a,b in pairs)+' |')
    print('|---|'+'---|'*len(pairs))
    for w in ws:
        print(f'| {w} | '+' | '.join(f'{med(a,w,k)/med(b,w,k):.3f}' for a,b in pairs)+' |')
table('keyspace cost', [('quietkv:auto+small=0','before:auto'),('quietkv:auto+small=0+ks=4','quietkv:auto+small=0')])
table('keyspace cost', [('quietkv:auto+small=0','before:auto'),('quietkv:auto+small=0+ks=4','quietkv:auto+small=0')],'cpu_us_per_op')
table('small database rule', [('quietkv:auto','quietkv:auto+small=0'),('quietkv:auto','rocksdb:buffered'),('quietkv:auto','fjall:buffered'),('quietkv:auto+small=0','rocksdb:buffered')])
table('small database rule', [('quietkv:auto','quietkv:auto+small=0'),('quietkv:auto','rocksdb:buffered'),('quietkv:auto','fjall:buffered')],'cpu_us_per_op')
table('small database rule', [('quietkv:auto','quietkv:auto+small=0'),('quietkv:auto','rocksdb:buffered')],'p99_us')
print('\n### absolute ops/s medians (min..max, n)\n')
modes=['before:auto','quietkv:auto+small=0','quietkv:auto+small=0+ks=4','quietkv:auto','rocksdb:buffered','fjall:buffered']
print('| workload | '+' | '.join(modes)+' |'); print('|---|'+'---|'*len(modes))
for w in ws:
    cells=[]
    for m in modes:
        s=span(m,w)
        cells.append(f'{med(m,w):.4g} ({s[0]:.3g}..{s[1]:.3g}, {s[2]})' if s else '-')
    print(f'| {w} | '+' | '.join(cells)+' |')
st=[x for m in runs for w in runs[m] for x in runs[m][w].get('steal_ms_per_s',[])]
print('\nsteal ms/s: median', statistics.median(st), 'max', max(st))
