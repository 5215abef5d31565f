import json,sys,statistics as st
j=json.load(open(sys.argv[1]))
d={}; order=[]
for r in j['runs']:
    for p in r['phases']:
        key=(r['value_size'],p['workload'])
        if key not in order: order.append(key)
        d.setdefault((r['mode'],)+key,[]).append(p)
def med(m,k,f):
    v=[f(p) for p in d.get((m,)+k,[]) if not p.get('disturbed') and f(p) is not None]
    return (st.median(v),len(v)) if v else (None,0)
Q,R,F='quietkv:auto','rocksdb:buffered','fjall:buffered'
ops=lambda p:p['ops_s']; cpu=lambda p:p['cpu_us_per_op']
print("| value | workload | quietkv / RocksDB ops/s | quietkv / fjall ops/s | CPU/op quietkv / RocksDB | clean phases q, r, f |")
print("|---|---|---|---|---|---|")
for k in order:
    def rat(a,b,f=ops):
        (x,n),(y,m)=med(a,k,f),med(b,k,f)
        return "n/r" if n<2 or m<2 or not y else "%.2f"%(x/y)
    print("| %d | %s | %s | %s | %s | %s |"%(k[0],k[1],rat(Q,R),rat(Q,F),rat(Q,R,cpu),", ".join(str(med(m,k,ops)[1]) for m in (Q,R,F))))
