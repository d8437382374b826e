"""The live page: one HTML document with plotly.js inlined (no CDN), fed by Server-Sent Events.

The page draws each snapshot it is sent: the route grid, overall progress
and ETA, reward statistics and histogram, throughput over time, and the
filmed episodes. When a snapshot says the final report is ready, it closes
its stream and moves to ``report`` (the same page ``--html`` writes).
Data is put in with ``textContent`` only: route ids and error messages
never become markup.
"""

from __future__ import annotations

import html

__all__ = ["SIGN_IN_PAGE", "live_page"]

_STYLE = """
body{font-family:system-ui,sans-serif;margin:20px auto;max-width:1280px;color:#222}
h1{font-size:1.4em;margin:0 0 .3em} h2{font-size:1.1em;margin:1.2em 0 .4em}
#bar{height:14px;background:#eee;border-radius:7px;overflow:hidden}
#bar>div{height:100%;width:0;background:#3b7dd8}
#progress-text{margin:.4em 0;font-variant-numeric:tabular-nums}
table{border-collapse:collapse;font-size:.9em;width:100%}
td,th{padding:4px 8px;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}
th{background:#f4f4f4} td.n{text-align:right;font-variant-numeric:tabular-nums}
td.err{color:#b00;font-size:.85em;max-width:520px;overflow-wrap:anywhere}
.s-running{color:#1a5fb4}.s-retrying{color:#c64600}.s-completed{color:#26a269}
.s-failed,.s-cancelled{color:#b00;font-weight:600}.s-pending{color:#888}
.grid{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:12px}
.plot{height:300px} .cards{display:flex;gap:24px;flex-wrap:wrap}
.card{background:#f7f7f9;border-radius:6px;padding:8px 14px}
.card b{display:block;font-size:1.3em;font-variant-numeric:tabular-nums}
.videos{display:flex;flex-wrap:wrap;gap:12px} video{width:300px;background:#000}
figure{margin:0} figcaption{font-size:.8em} #state{color:#666;font-size:.85em}
"""

_SCRIPT = """
(function(){
var seen={videos:{},hist:'',tputAt:0}, es=null;
// Plots are redrawn only when their data changed, throughput at most every 2 s:
// the browser often shares the run's cores.
var PLOT_EVERY=2000;
function $(id){return document.getElementById(id)}
function fmt(x,d){return x===null||x===undefined?'–':Number(x).toLocaleString(undefined,
 {minimumFractionDigits:d===undefined?2:d,maximumFractionDigits:d===undefined?2:d})}
function ci(p){return p?'['+fmt(p[0])+', '+fmt(p[1])+']':'–'}
function dur(s){if(s===null||s===undefined)return '–';s=Math.round(s);
 var h=Math.floor(s/3600),m=Math.floor(s%3600/60),r=s%60;
 return (h?h+'h ':'')+(h||m?m+'m ':'')+r+'s'}
function cell(tr,i,text,cls){var td=tr.children[i];td.textContent=text;
 if(cls!==undefined)td.className=cls}
function row(r){var tr=document.querySelector('tr[data-route="'+CSS.escape(r.route)+'"]');
 if(!tr){tr=document.createElement('tr');tr.dataset.route=r.route;
  for(var i=0;i<5;i++)tr.appendChild(document.createElement('td'));
  $('routes').appendChild(tr)}
 cell(tr,0,r.route);cell(tr,1,r.status,'status s-'+r.status);
 cell(tr,2,r.done+' / '+(r.planned===null?'∞':r.planned),'n episodes');
 cell(tr,3,fmt(r.stepsPerS,0),'n rate');cell(tr,4,r.error||'','err')}
function progress(p,s){var f=p.fraction===null?0:p.fraction;
 $('bar').firstElementChild.style.width=(100*f).toFixed(1)+'%';
 $('progress-text').textContent=p.done.toLocaleString()+' of '+
  (p.planned===null?'?':p.planned.toLocaleString())+' episodes · '+
  p.steps.toLocaleString()+' steps · '+dur(s.elapsed)+' elapsed · ETA '+
  (s.ended?'done':dur(p.eta))}
function stats(st){$('mean').textContent=fmt(st.mean);$('mean-ci').textContent=ci(st.meanCi);
 $('iqm').textContent=fmt(st.iqm);$('iqm-ci').textContent=ci(st.iqmCi);
 $('n').textContent=st.seen===undefined?'0':st.seen.toLocaleString();
 if(!st.histogram)return;var key=JSON.stringify(st.histogram);
 if(key===seen.hist)return;seen.hist=key;var e=st.histogram.edges,x=[];
 for(var i=0;i+1<e.length;i++)x.push((e[i]+e[i+1])/2);
 Plotly.react('hist',[{type:'bar',x:x,y:st.histogram.counts,marker:{color:'#3b7dd8'}}],
  {margin:{t:10,r:10,b:40,l:50},xaxis:{title:{text:'episode return'}},
   yaxis:{title:{text:'episodes'}},bargap:0.05},{displaylogo:false,responsive:true})}
function throughput(t,force){var now=Date.now();
 if(!force&&now-seen.tputAt<PLOT_EVERY)return;seen.tputAt=now;Plotly.react('tput',[{type:'scatter',mode:'lines',x:t.t,
 y:t.stepsPerS,line:{color:'#26a269'}}],{margin:{t:10,r:10,b:40,l:60},
 xaxis:{title:{text:'seconds since start'}},yaxis:{title:{text:'steps/s'},rangemode:'tozero'}},
 {displaylogo:false,responsive:true})}
function videos(list){list.forEach(function(v){if(seen.videos[v.url])return;
 seen.videos[v.url]=1;var f=document.createElement('figure'),el=document.createElement('video');
 el.controls=true;el.muted=true;el.preload='metadata';el.src=v.url;
 var c=document.createElement('figcaption');c.textContent=v.caption;
 f.appendChild(el);f.appendChild(c);$('videos').appendChild(f);
 $('videos-head').hidden=false})}
function draw(s){document.title=s.title+' (live)';$('title').textContent=s.title;
 s.routes.forEach(row);progress(s.progress,s);stats(s.stats||{});throughput(s.throughput,s.ended);
 videos(s.videos);document.body.dataset.version=s.version;
 $('state').textContent=s.final?'run ended: opening the report…':
  (s.ended?'run ended':'live');
 if(s.final){es.close();location.replace('report')}}
es=new EventSource('events');
es.onmessage=function(e){draw(JSON.parse(e.data))};
es.onerror=function(){$('state').textContent='reconnecting…'};
})();
"""

_BODY = """<h1 id="title"></h1><div id="state">connecting…</div>
<div id="bar"><div></div></div><div id="progress-text"></div>
<h2>Routes</h2><table><thead><tr><th>route</th><th>status</th><th>episodes</th>
<th>steps/s</th><th>last error</th></tr></thead><tbody id="routes"></tbody></table>
<h2>Episode returns</h2><div class="cards">
<div class="card">mean<b id="mean">–</b><span id="mean-ci">–</span></div>
<div class="card">IQM<b id="iqm">–</b><span id="iqm-ci">–</span></div>
<div class="card">episodes<b id="n">0</b>95% bootstrap CIs</div></div>
<div class="grid"><div><h2>Return histogram</h2><div id="hist" class="plot"></div></div>
<div><h2>Throughput</h2><div id="tput" class="plot"></div></div></div>
<h2 id="videos-head" hidden>Filmed episodes</h2><div id="videos" class="videos"></div>
"""

SIGN_IN_PAGE = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<title>rlmesh-trio dashboard: sign in</title></head>
<body style="font-family:system-ui,sans-serif;margin:40px">
<h1>rlmesh-trio dashboard</h1><p>This dashboard needs its token.</p>
<form method="get" action="./"><input type="password" name="token" autofocus
 placeholder="token"> <button>Open</button></form></body></html>"""


def live_page(title: str) -> str:
    """The live page as one HTML string (plotly.js inlined; a few MB, built once per server)."""
    from plotly.offline import get_plotlyjs

    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f"<title>{html.escape(title)} (live)</title><style>{_STYLE}</style>",
            '<link rel="icon" href="data:,">',
            f"<script>{get_plotlyjs()}</script>",
            "</head><body>",
            _BODY,
            f"<script>{_SCRIPT}</script>",
            "</body></html>",
        ]
    )
