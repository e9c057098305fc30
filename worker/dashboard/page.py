"""The dashboard page: one HTML document, inline CSS, JS and SVG (no CDN, no build step).

The page polls ``api/state`` (relative URLs, so it also works mounted under a
prefix such as ``/dpstream/`` on a Faust app's web server) and draws every
chart as plain SVG. Item labels come from releases, which anyone who can
produce events may influence, so every value is inserted as escaped text.
"""

from __future__ import annotations

PAGE = r"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>dpstream dashboard</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0;background:#f5f6f8;color:#1d2330}
header{background:#1d2330;color:#fff;padding:10px 18px;display:flex;gap:18px;align-items:baseline;flex-wrap:wrap}
header h1{font-size:18px;margin:0} header .sub{opacity:.75;font-size:12px}
main{padding:12px 18px}
.banner{background:#b00020;color:#fff;padding:10px 14px;font-weight:600;border-radius:4px;margin:8px 0}
section.topo{background:#fff;border-radius:6px;box-shadow:0 1px 3px rgba(0,0,0,.12);margin:0 0 16px;padding:10px 14px}
section.topo h2{font-size:16px;margin:4px 0 6px}
.privacy{display:flex;flex-wrap:wrap;gap:6px 18px;font-size:13px;margin-bottom:6px}
.privacy b{color:#0b5394}
.tabs button{border:1px solid #c5cad3;background:#f0f2f5;border-radius:3px;margin:0 4px 4px 0;padding:2px 8px;cursor:pointer;font:inherit}
.tabs button.on{background:#0b5394;color:#fff;border-color:#0b5394}
.tabs button.np{border-color:#b00020;color:#b00020}
.grid{display:grid;grid-template-columns:minmax(300px,1fr) minmax(340px,1.3fr);gap:14px}
table{border-collapse:collapse;font-size:13px;width:100%}
th,td{text-align:left;padding:2px 6px;border-bottom:1px solid #eceef1} td.n{text-align:right;font-variant-numeric:tabular-nums}
.muted{color:#6b7280;font-size:12px}
.bar{height:10px;background:#dbe4f0;position:relative;min-width:120px}
.bar i{position:absolute;top:0;bottom:0;background:#0b5394}
.bar s{position:absolute;top:4px;height:2px;background:#e69138}
.bar u{position:absolute;top:-2px;bottom:-2px;width:2px;background:#b00020}
.progress{height:8px;background:#e5e7eb;border-radius:4px;width:160px;display:inline-block;vertical-align:middle}
.progress i{display:block;height:8px;background:#38761d;border-radius:4px}
.ops{font-size:13px}
svg text{font-size:10px;fill:#4b5563}
input[type=text]{font:inherit;padding:3px 6px;width:220px}
.err{color:#b00020}
</style></head>
<body>
<header><h1>dpstream</h1><span class="sub" id="status">connecting...</span></header>
<main>
<div id="banners"></div>
<div id="topos"></div>
<p class="muted">Everything on this page except throughput and lag is read from the public
release topics: post-processing of differentially private releases, no privacy cost.
Error bars are each release's stated error bound. Throughput and lag come from the worker's
own metrics endpoint (operator-only).</p>
</main>
<script>
"use strict";
const sel = {};        // topology -> selected shard
const queries = {};    // topology -> {shard, item, answer}
const COLORS = ["#0b5394","#e69138","#38761d","#9900ff","#cc0000","#45818e","#bf9000","#a64d79"];
function esc(s){return String(s).replace(/[&<>"']/g,c=>({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;","'":"&#39;"}[c]));}
function fmt(x,d){if(x===null||x===undefined||Number.isNaN(x))return "–";const a=Math.abs(x);
  if(d!==undefined)return Number(x).toFixed(d);
  if(a!==0&&(a<1e-3||a>=1e7))return Number(x).toExponential(2);
  return a>=100?Math.round(x).toLocaleString("en-US"):Number(x).toPrecision(3);}
function when(ms){if(!ms)return "–";const d=new Date(ms);return d.toISOString().substr(11,8)+"Z";}
function chart(series, threshold, w, h){
  // threshold: a number (flat line) or a series [[t, v], ...] (dashed, red)
  w=w||460; h=h||170; const L=44,R=8,T=8,B=22;
  let xs=[],ys=[];
  const tser=Array.isArray(threshold)?threshold.filter(p=>p[1]!==null&&p[1]!==undefined):null;
  for(const k in series)for(const p of series[k]){if(p[1]===null||p[1]===undefined)continue;xs.push(p[0]);ys.push(p[1]);}
  if(tser){for(const p of tser){xs.push(p[0]);ys.push(p[1]);}threshold=null;}
  if(threshold!==null&&threshold!==undefined)ys.push(threshold);
  if(!xs.length)return '<p class="muted">no points yet</p>';
  let x0=Math.min(...xs),x1=Math.max(...xs); if(x1===x0){x0-=1000;x1+=1000;}
  let y0=Math.min(0,...ys),y1=Math.max(...ys); if(y1===y0)y1=y0+1;
  const X=t=>L+(t-x0)/(x1-x0)*(w-L-R), Y=v=>T+(1-(v-y0)/(y1-y0))*(h-T-B);
  let s=`<svg width="${w}" height="${h}" viewBox="0 0 ${w} ${h}" role="img">`;
  s+=`<line x1="${L}" y1="${h-B}" x2="${w-R}" y2="${h-B}" stroke="#9ca3af"/><line x1="${L}" y1="${T}" x2="${L}" y2="${h-B}" stroke="#9ca3af"/>`;
  s+=`<text x="${L-4}" y="${T+8}" text-anchor="end">${esc(fmt(y1))}</text><text x="${L-4}" y="${h-B}" text-anchor="end">${esc(fmt(y0))}</text>`;
  s+=`<text x="${L}" y="${h-6}">${esc(when(x0))}</text><text x="${w-R}" y="${h-6}" text-anchor="end">${esc(when(x1))}</text>`;
  if(threshold!==null&&threshold!==undefined){const y=Y(threshold);
    s+=`<line x1="${L}" y1="${y}" x2="${w-R}" y2="${y}" stroke="#b00020" stroke-dasharray="4 3"/><text x="${w-R}" y="${y-3}" text-anchor="end" style="fill:#b00020">threshold</text>`;}
  if(tser&&tser.length){let d="";tser.forEach((p,j)=>{d+=(j?"L":"M")+X(p[0]).toFixed(1)+","+Y(p[1]).toFixed(1);});
    const q=tser[tser.length-1];
    s+=`<path d="${d}" fill="none" stroke="#b00020" stroke-dasharray="4 3"/><text x="${X(q[0])}" y="${Y(q[1])-3}" text-anchor="end" style="fill:#b00020">threshold</text>`;}
  let i=0;
  for(const k in series){const c=COLORS[i++%COLORS.length];let d="",pen=false;
    for(const p of series[k]){if(p[1]===null||p[1]===undefined){pen=false;continue;}d+=(pen?"L":"M")+X(p[0]).toFixed(1)+","+Y(p[1]).toFixed(1);pen=true;}
    s+=`<path d="${d}" fill="none" stroke="${c}" stroke-width="1.6"><title>${esc(k)}</title></path>`;
    const pts=series[k].filter(p=>p[1]!==null&&p[1]!==undefined);
    if(pts.length===1)s+=`<circle cx="${X(pts[0][0]).toFixed(1)}" cy="${Y(pts[0][1]).toFixed(1)}" r="3" fill="${c}"/>`;}
  s+="</svg>";
  i=0; let leg='<div class="muted">';
  for(const k in series){leg+=`<span style="color:${COLORS[i++%COLORS.length]}">&#9632;</span> ${esc(k)} &nbsp;`;}
  return s+leg+"</div>";
}
function hhTable(hh){
  if(!hh.items.length)return `<p class="muted">no item above the threshold (${esc(fmt(hh.threshold))}) yet</p>`;
  let mx=Math.max(...hh.items.map(r=>r.high!==null?r.high:r.estimate),hh.threshold||0,1);
  let s='<table class="hh"><tr><th>item</th><th>estimate</th><th>error bar</th><th style="width:40%"></th></tr>';
  for(const r of hh.items){
    const lo=r.low!==null?r.low:r.estimate, hi=r.high!==null?r.high:r.estimate;
    const bar=`<div class="bar"><i style="width:${Math.max(0,r.estimate)/mx*100}%"></i>`+
      `<s style="left:${Math.max(0,lo)/mx*100}%;width:${Math.max(0,hi-Math.max(0,lo))/mx*100}%"></s>`+
      (hh.threshold?`<u style="left:${hh.threshold/mx*100}%"></u>`:"")+`</div>`;
    const eb=r.low!==null?`[${esc(fmt(lo))}, ${esc(fmt(hi))}]`:'<span class="muted">not stated</span>';
    s+=`<tr class="hh-item"><td>${esc(r.item)}</td><td class="n">${esc(fmt(r.estimate))}</td><td class="n">${eb}</td><td>${bar}</td></tr>`;}
  return s+`</table><p class="muted">threshold ${esc(fmt(hh.threshold))} (red line)`+
    (hh.coverage?`; every item with a true count above ${esc(fmt(hh.coverage))} is listed`:"")+`</p>`;
}
function table(tb){
  let s='<table>'; for(const f of tb.fields)s+=`<tr><th>${esc(f[0])}</th><td>${esc(f[1])}</td></tr>`; s+='</table>';
  if(tb.columns.length){s+=`<p class="muted">${esc(tb.name)}</p><table><tr>${tb.columns.map(c=>`<th>${esc(c)}</th>`).join("")}</tr>`;
    for(const r of tb.rows)s+=`<tr>${r.map(v=>`<td class="n">${esc(typeof v==="number"?fmt(v):v)}</td>`).join("")}</tr>`; s+='</table>';}
  return s;
}
function sketchBox(t, card){
  const q=queries[t.topology]||{};
  let s=`<form data-topo="${esc(t.topology)}" class="qf"><label>query item <input type="text" name="item" value="${esc(q.item||"")}" placeholder="e.g. 93.184.216.0/24"></label> <button>estimate</button></form>`;
  if(q.error)s+=`<p class="err">${esc(q.error)}</p>`;
  const a=q.answer;
  if(a&&a.shard===card.shard){
    s+=`<p class="qa">${esc(a.item)} on ${esc(a.shard)}: <b>${esc(fmt(a.estimate))}</b> `+
      (a.low!==null?`(true count in [${esc(fmt(a.low))}, ${esc(fmt(a.high))}] up to lag and collisions; noise term w.p. ${esc(1-((a.error_bound||{}).beta||0))})`:"")+
      ` from epoch ${esc(a.epoch)} seq ${esc(a.seq)}</p>`;
    const ser={}; ser[a.item]=a.series; s+=chart(ser,null);
  }
  s+=`<p class="muted">sketch ${esc(card.sketch.depth)}x${esc(card.sketch.width)} (${esc(card.sketch.estimator)}), answered from the latest released matrix</p>`;
  return s;
}
function render(st){
  const status=document.getElementById("status");
  status.textContent=`broker ${st.broker} · topics ${st.topics.join(", ")} · ${st.view.seen} releases read`+
    (st.follower_error?` · ${st.follower_error}`:"")+` · updated ${new Date().toISOString().substr(11,8)}Z`;
  const nb=st.view.topologies.filter(t=>t.not_private);
  document.getElementById("banners").innerHTML=nb.map(t=>`<div class="banner" id="not-private">NOT PRIVATE: releases of ${esc(t.topology)} were made with ${esc([...new Set(t.shards.filter(c=>!c.private).map(c=>c.noise_kind||"non-secure"))].join("/"))} noise. They carry no differential-privacy guarantee (tests and benchmarks only).</div>`).join("");
  let html="";
  if(!st.view.topologies.length)html='<p class="muted">waiting for the first release...</p>';
  for(const t of st.view.topologies){
    const p=t.privacy, ops=(st.metrics||{})[t.topology];
    if(!sel[t.topology]||!t.shards.find(c=>c.shard===sel[t.topology]))sel[t.topology]=t.shards[0].shard;
    const card=t.shards.find(c=>c.shard===sel[t.topology]);
    html+=`<section class="topo" data-topology="${esc(t.topology)}"><h2>${esc(t.topology)} <span class="muted">${esc(p.mechanism)}</span></h2>`;
    html+=`<div class="privacy budget"><span>&epsilon; = <b>${esc(p.eps)}</b> per epoch</span><span>&delta; = <b>${esc(p.delta)}</b></span>`+
      (p.delta_tilde!==null&&p.delta_tilde!==undefined?`<span>&delta;~ = <b>${esc(fmt(p.delta_tilde))}</b></span>`:"")+
      `<span>relation <b>${esc(p.relation)}</b></span><span>unit <b>${esc(p.unit)}</b>${p.unit_cap>1?` (cap ${esc(p.unit_cap)})`:""}</span>`+
      `<span>clock <b>${esc(p.clock)}</b>${p.tick_ms?` (${esc(p.tick_ms)} ms ticks)`:""}</span><span>releases published <b>${esc(t.releases)}</b></span>`+
      `<span>noise <b>${t.not_private?'<span class="err">NOT PRIVATE</span>':esc(card.noise_kind||"not stated")}</b></span></div>`;
    if(ops)html+=`<div class="ops">throughput <b>${esc(fmt(ops.events_per_s))}</b> events/s · lag <b>${esc(fmt(ops.lag_messages))}</b> messages · ${esc(fmt(ops.events_total))} events ingested</div>`;
    html+=`<div class="tabs">${t.shards.map(c=>`<button data-topo="${esc(t.topology)}" data-shard="${esc(c.shard)}" class="${c.shard===card.shard?"on":""} ${c.private?"":"np"}">${esc(c.shard)}</button>`).join("")}</div>`;
    const prog=card.progress!==null?`<span class="progress"><i style="width:${(card.progress*100).toFixed(1)}%"></i></span> ${esc(card.rounds)}/${esc(card.horizon)} rounds`:"";
    html+=`<p class="muted">shard <b>${esc(card.shard)}</b>: epoch ${esc(card.epoch)} seq ${esc(card.seq)}${card.final?" (final)":""} published ${esc(when(card.published_at))} · epoch progress ${prog} · ${esc(card.releases)} releases read</p>`;
    html+='<div class="grid">';
    if(card.heavy_hitters){html+=`<div>${hhTable(card.heavy_hitters)}</div><div><p class="muted">top items across releases</p>${chart(card.heavy_hitters.series,card.heavy_hitters.threshold_series)}</div>`;}
    else if(card.sketch){html+=`<div>${sketchBox(t,card)}</div><div></div>`;}
    else if(card.table){html+=`<div><p class="muted">last window (${esc(card.kind)})</p>${table(card.table)}</div><div></div>`;}
    html+="</div></section>";
  }
  const box=document.getElementById("topos");
  const focus=document.activeElement&&document.activeElement.name==="item"?document.activeElement.closest("form").dataset.topo:null;
  box.innerHTML=html;
  if(focus){const el=box.querySelector(`form[data-topo="${CSS.escape(focus)}"] input`);if(el){el.focus();el.setSelectionRange(el.value.length,el.value.length);}}
}
let last=null;
async function refresh(){
  try{const r=await fetch("api/state",{cache:"no-store"});last=await r.json();
    for(const t in queries){const q=queries[t];if(q.item&&q.shard)await runQuery(t,q.shard,q.item,true);}
    render(last);}
  catch(e){document.getElementById("status").textContent="dashboard server unreachable: "+e;}
}
async function runQuery(topo,shard,item,quiet){
  const q=queries[topo]={item,shard};
  const u=`api/query?topology=${encodeURIComponent(topo)}&shard=${encodeURIComponent(shard)}&item=${encodeURIComponent(item)}`;
  const r=await fetch(u,{cache:"no-store"});const body=await r.json();
  if(r.ok)q.answer=body;else q.error=body.error;
  if(!quiet&&last)render(last);
}
document.addEventListener("click",e=>{const b=e.target.closest(".tabs button");if(!b)return;sel[b.dataset.topo]=b.dataset.shard;if(last)render(last);});
document.addEventListener("input",e=>{if(e.target.name==="item"){const f=e.target.closest("form");(queries[f.dataset.topo]=queries[f.dataset.topo]||{}).item=e.target.value;}});
document.addEventListener("submit",e=>{const f=e.target.closest("form.qf");if(!f)return;e.preventDefault();
  const t=f.dataset.topo,item=f.item.value.trim();if(item)runQuery(t,sel[t],item,false);});
const params=new URLSearchParams(location.search);
if(params.get("query")&&params.get("topology")){queries[params.get("topology")]={item:params.get("query"),shard:params.get("shard")||"r1"};sel[params.get("topology")]=params.get("shard")||"r1";}
for(const s of (params.get("select")||"").split(",")){const i=s.lastIndexOf(":");if(i>0)sel[s.slice(0,i)]=s.slice(i+1);}
refresh(); setInterval(refresh, Number(params.get("refresh_ms")||1000));
</script></body></html>
"""
