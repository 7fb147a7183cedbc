# Issue 14 benchmark note: trainplan against Calculon (github.com/calculon-ai/calculon,
# run from its own checkout, not vendored) on a slice both cover: GPT-3 175B on
# 1024 x A100-80GB, global batch 1536, sequence 2048; tp 1-8 inside a node, pp,
# interleave, micro-batch 1-8, recompute none/full, ZeRO-1 / optimizer sharding,
# sequence parallelism, DP overlap. Needs Debian's python3-numpy; Calculon's
# search-only imports (pandas, psutil) are stubbed since single runs do not use them.
#   /usr/bin/python3 bench/compare_calculon.py CALCULON_CHECKOUT build/cli/trainplan
import sys, os, json, logging, subprocess, types, itertools
CALC = sys.argv[1]
sys.path.insert(0, CALC)
os.chdir(CALC)
[sys.modules.__setitem__(n, types.ModuleType(n)) for n in ("pandas", "psutil")]
import calculon
from calculon.llm import *
TP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', sys.argv[2])) if not os.path.isabs(sys.argv[2]) else sys.argv[2]
app = Llm.Application(json.load(open('models/gpt3-175B.json')))
syst_json = json.load(open('systems/a100_80g.json'))
base = json.load(open('examples/3072_t4_p64_d12_mbs4_full.json'))
log = logging.getLogger(); log.setLevel(logging.ERROR)
rows = []
for tp, pp, mb, v, rc in itertools.product([1,2,4,8],[1,2,4,8,16,32],[1,2,4,8],[1,2,3,4,6,12],["none","full"]):
    if tp*pp < 2: continue
    dp = 1024 // (tp*pp)
    if 1536 % (dp*mb): continue
    ga = 1536 // (dp*mb)
    if v > 1 and (pp < 2 or 96 % (pp*v) or ga % pp): continue
    exe = dict(base)
    exe.update({"num_procs":1024,"tensor_par":tp,"pipeline_par":pp,"data_par":dp,"tensor_par_net":0,"pipeline_par_net":1 if tp*pp>8 else 0,
                "data_par_net":1,"batch_size":1536,"microbatch_size":mb,"activation_recompute":rc,"pipeline_interleaving":v,
                "data_par_overlap":True,"tensor_par_comm_type":"rs_ag" if tp>1 else "ar","optimizer_sharding":True})
    try:
        s = System(syst_json); m = Llm(app, log); m.compile(s, Llm.Execution.from_json(exe)); m.run(s)
        st = m.get_stats_json(False)
        c_time = st['total_time']; c_fit = st['proc_mem_tier1_cap_req'] <= s.mem1.capacity
    except Exception as e:
        c_time, c_fit = None, False
    args = [TP,'simulate','gpt3-175b','--gpu','a100-sxm-80gb','--gpus','1024','--global-batch','1536','--seq-len','2048',
            '--tp',str(tp),'--pp',str(pp),'--micro-batch',str(mb),'--zero','1','--recompute',rc,'--framework','megatron','--json']
    if v > 1: args += ['--vp',str(v)]
    if tp > 1: args += ['--sp']
    r = subprocess.run(args, capture_output=True, text=True)
    try:
        j = json.loads(r.stdout); t_time = j['time']['step_s']; t_fit = j['memory']['fits']
    except Exception:
        t_time, t_fit = None, False
    rows.append((tp,pp,dp,v,mb,rc,c_time,c_fit,t_time,t_fit))
both = [r for r in rows if r[7] and r[9]]
print('slice', len(rows), 'both fit', len(both), 'calculon fits', sum(r[7] for r in rows), 'trainplan fits', sum(r[9] for r in rows))
def ranks(x):
    o = sorted(range(len(x)), key=lambda i: x[i]); rk = [0]*len(x)
    for k, i in enumerate(o): rk[i] = k
    return rk
a = ranks([r[6] for r in both]); b = ranks([r[8] for r in both]); n = len(both)
rho = 1 - 6*sum((x-y)**2 for x,y in zip(a,b))/(n*(n*n-1))
print('spearman', round(rho,3))
cb = min(both, key=lambda r: r[6]); tb = min(both, key=lambda r: r[8])
print('calculon best', cb); print('trainplan best', tb)
print('trainplan rank of calculon best', sorted(both, key=lambda r: r[8]).index(cb)+1, 'calculon rank of trainplan best', sorted(both, key=lambda r: r[6]).index(tb)+1)
