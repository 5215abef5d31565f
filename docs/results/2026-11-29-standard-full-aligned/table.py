import json,sys,statistics as st
j=json.load(open(sys.argv[1]))
data={}; order=[]
for r in j['runs']:
    for p in r['phases']:
        if p['workload'] not in order: order.append(p['workload'])
        data.setdefault((r['mode'],p['workload']),[]).append(p)
def clean(m,w): return [p for p in data.get((m,w),[]) if not p.get('disturbed')]
def med(m,w,f):
    v=[f(p) for p in clean(m,w) if f(p) is not None]
    return st.median(v) if v else None
A='quietkv:auto'; B='quietkv:auto+align=0'; R='rocksdb:buffered'; RA='rocksdb:buffered+align=1'
ops=lambda p:p['ops_s']; cpu=lambda p:p['cpu_us_per_op']; kib=lambda p:(p['device_read_bytes_per_op'] or 0)/1024
pc=lambda p:(p['page_cache_bytes'] or 0)/2**20; sa=lambda p:p.get('space_amp'); wa=lambda p:p.get('write_amp')
def ratio(x,y,w,f=ops):
    if len(clean(x,w))<2 or len(clean(y,w))<2: return "n/r"
    a,b=med(x,w,f),med(y,w,f)
    if a is None or not b: return "-"
    return "%.2f"%(a/b)
def rng(m,w,f=ops):
    v=[f(p) for p in clean(m,w)]
    return "%.0f..%.0f"%(min(v),max(v)) if v else "-"
print("| workload | quietkv / RocksDB ops/s | quietkv / RocksDB block_align | aligned / unaligned quietkv | RocksDB block_align / default | CPU/op quietkv / RocksDB | clean phases q, q-unaligned, r, r-align | device KiB/op q, q-unaligned, r, r-align | page cache MiB, same order |")
print("|---|---|---|---|---|---|---|---|---|")
for w in order:
    f1=lambda fn,ms,d=2: ", ".join(("%.*f"%(d,med(m,w,fn))) if med(m,w,fn) is not None else "-" for m in ms)
    M=[A,B,R,RA]
    print("| %s | %s | %s | %s | %s | %s | %s | %s | %s |"%(w, ratio(A,R,w), ratio(A,RA,w), ratio(A,B,w), ratio(RA,R,w), ratio(A,R,w,cpu), ", ".join(str(len(clean(m,w))) for m in M), f1(kib,M), f1(pc,M,0)))
print()
print("| workload | space amp q, q-unaligned, r, r-align | write amp same order | ops/s min..max q, q-unaligned, r, r-align |")
print("|---|---|---|---|")
for w in order:
    M=[A,B,R,RA]
    f1=lambda fn,d=2: ", ".join(("%.*f"%(d,med(m,w,fn))) if med(m,w,fn) is not None else "-" for m in M)
    print("| %s | %s | %s | %s |"%(w, f1(sa), f1(wa), "; ".join(rng(m,w) for m in M)))
