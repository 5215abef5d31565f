import json,sys,statistics as st
j=json.load(open(sys.argv[1])); LIM=100
runs=j['runs']; data={}; order=[]
for r in runs:
    for p in r['phases']:
        if p['workload'] not in order: order.append(p['workload'])
        data.setdefault((r['mode'],p['workload']),[]).append(p)
def clean(m,w): return [p for p in data.get((m,w),[]) if (p.get('steal_ms_per_s') or 0)<=LIM]
def med(m,w,f):
    v=[f(p) for p in clean(m,w) if f(p) is not None]
    return st.median(v) if v else None
A='quietkv:auto'; B='quietkv:auto+trim=0'; R='rocksdb:buffered'; F='fjall:buffered'
ops=lambda p:p['ops_s']; cpu=lambda p:p['cpu_us_per_op']; kib=lambda p:(p['device_read_bytes_per_op'] or 0)/1024
pc=lambda p:(p['page_cache_bytes'] or 0)/2**20; rss=lambda p:(p['peak_rss_bytes'] or 0)/2**20
def ratio(x,y,w,f=ops):
    if len(clean(x,w))<2 or len(clean(y,w))<2: return "n/r"
    a,b=med(x,w,f),med(y,w,f); return "%.2f"%(a/b)
def rng(x,y,w):
    v=[a['ops_s']/b['ops_s'] for a in clean(x,w) for b in clean(y,w) if a['repeat']==b['repeat'] if 'repeat' in a] 
    return ""
print("| workload | quietkv / RocksDB ops/s | quietkv / fjall | CPU/op quietkv / RocksDB | no trim / trim ops/s | no trim / trim CPU/op | clean phases q, q-no-trim, r, f | device KiB/op q, no trim, r | page cache MiB q, no trim, r | peak RSS MiB q, no trim, r |")
print("|---|---|---|---|---|---|---|---|---|---|")
for w in order:
    f1=lambda fn,ms,d=2: ", ".join(("%.*f"%(d,med(m,w,fn))) if med(m,w,fn) is not None else "-" for m in ms)
    print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |"%(w, ratio(A,R,w), ratio(A,F,w), ratio(A,R,w,cpu), ratio(B,A,w), ratio(B,A,w,cpu), ", ".join(str(len(clean(m,w))) for m in [A,B,R,F]), f1(kib,[A,B,R]), f1(pc,[A,B,R],0), f1(rss,[A,B,R],0)))
