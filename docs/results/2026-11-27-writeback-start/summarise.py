import re,glob,sys
rows={}
for f in sorted(glob.glob(sys.argv[1]+'/*-*/report.md')):
    tag=f.split('/')[-2]
    txt=open(f).read()
    for w in re.split(r'\n### ',txt)[1:]:
        name=w.splitlines()[0]
        for line in w.splitlines():
            cells=[c.strip() for c in line.strip('|').split('|')]
            if cells and cells[0] in ('ops/s','latency p99 us','latency p99.9 us','CPU us/op (process, all threads)','write amplification (device / user bytes)'):
                rows.setdefault((name,cells[0]),{})[tag]=float(cells[1].split()[0])
for (name,fig),d in rows.items():
    if name not in ('fillseq','fillrandom','overwrite','readwhilewriting'): continue
    n=[d[k] for k in sorted(d) if k.startswith('NEW')]; o=[d[k] for k in sorted(d) if k.startswith('OLD')]
    med=lambda v: sorted(v)[len(v)//2]
    print(f"{name:16} {fig[:22]:22} NEW {n} OLD {o}  med {med(n)} / {med(o)} = {med(n)/med(o):.2f}")
