"""The job page stays true while it is open.

The page's content (`html.job_content`: the expansion under way, the job model and Kafka's live
counts, history, expansions, barrier, processors, leases, log) sits in ``<div id='live'>``; a
small inline script (no external asset) fetches it again every `FETCH_S` from
``/jobs/<job>/live`` and replaces it in place when it changed, so an expansion that starts
appears and one that completes shows completed, without a reload. Between fetches it counts:
every ``data-since`` (a heartbeat's age, a step's time) up and every ``data-until`` (a lease's
expiry, the grace) down, on the server's clock (the ``X-Samza-Expand-Now`` header of each
answer), and shows each ``<time>`` in the Airflow user's time zone (the one Airflow's own UI
keeps in the browser, else the browser's) with how long ago.

The line above the content (``#live-status``) says when the page was last updated; a fetch
that fails says so there - "Not updated since <time> (<n> ago): the server answered 503: Kafka
is unreachable - ..." (the title and message of the error page) or that the server did not
answer - and the script keeps fetching, so the page recovers by itself. While it is stale, the
box's "(<n> ago)" counts every second, ages keep counting, and every judgement of the last update
(a processor "alive" or "dead", a lease "held", the next action at the top) reads "unknown" or is
marked not current (``#live.stale``, `state_html.fresh`). While the user selects
text or uses a form in the content, newer content waits (the line says so). Without JavaScript the
page reloads every `REFRESH_S` (``<noscript>`` meta refresh).
"""

from __future__ import annotations

from airflow_samza_expand.airflow._ui.markup import REFRESH_S, _e

FETCH_S = 3  # the script fetches the content this often
NOW_HEADER = "X-Samza-Expand-Now"

SCRIPT = """<script>(function(){
var live=document.getElementById('live'),st=document.getElementById('live-status');
if(!live||!st||!window.fetch)return;
var every=%(every)d,skew=0,okAt=Date.now(),busy=false,held=false,fails=0,why='',
  last=live.innerHTML;
function zone(){var v;try{v=localStorage.getItem('timezone')}catch(e){return undefined}
  if(!v)return undefined;try{v=JSON.parse(v)}catch(e){}  // Airflow's UI keeps it as JSON
  return typeof v==='string'&&v?v:undefined}
function clock(ms,withDate){
  var o={hour:'2-digit',minute:'2-digit',second:'2-digit',hour12:false};
  if(withDate){o.year='numeric';o.month='2-digit';o.day='2-digit'}
  try{return new Date(ms).toLocaleString('sv-SE',Object.assign({timeZone:zone()},o))}
  catch(e){return new Date(ms).toLocaleString('sv-SE',o)}}
function span(s){
  s=Math.max(0,Math.round(s));
  if(s<90)return s+' s';
  if(s<5400)return Math.round(s/60)+' min';
  if(s<172800)return Math.round(s/3600)+' h';
  return Math.round(s/86400)+' d'}
function ago(ms,now){var d=(now-ms)/1000;return d>=0?span(d)+' ago':'in '+span(-d)}
function tick(){
  var now=Date.now()+skew;
  live.querySelectorAll('[data-since]').forEach(function(e){
    var t=Date.parse(e.dataset.since);
    if(!isNaN(t))e.textContent=(Math.max(0,now-t)/1000).toFixed(1)+' s'});
  live.querySelectorAll('[data-until]').forEach(function(e){
    var t=Date.parse(e.dataset.until);if(isNaN(t))return;
    var v=Math.max(0,t-now)/1000;
    e.textContent=e.dataset.whole?String(Math.ceil(v)):v.toFixed(1)+' s'});
  var today=clock(now,true).slice(0,10);
  live.querySelectorAll('time[datetime]').forEach(function(e){
    var t=Date.parse(e.getAttribute('datetime'));if(isNaN(t))return;
    var full=clock(t,true);e.title=e.getAttribute('datetime')+' (UTC)';
    e.textContent=(full.slice(0,10)===today?clock(t,false):full)+' ('+ago(t,now)+')'});
  var z=zone()||Intl.DateTimeFormat().resolvedOptions().timeZone;
  st.textContent=fails?stale(now):'Live: updated '+clock(okAt+skew,false)+' ('
    +ago(okAt+skew,now)+'), every '+every+' s; times in '+z+'.'
    +(held?' Newer content is held while you select text or use a form.':'')}
function stale(now){return 'Not updated since '+clock(okAt+skew,false)+' ('+ago(okAt+skew,now)
  +'): '+why+' - retrying every '+every+' s; alive, held and the next action are unknown '
  +'until it updates.'}
function failed(w){  // the content stays, marked stale (#live.stale); the box's age counts on
  fails+=1;why=w;st.className='box';live.classList.add('stale');
  live.dataset.failures=(+(live.dataset.failures||0)+1);st.textContent=stale(Date.now()+skew)}
function busyUser(){  // selecting text or using a form in the content: replace it later
  var a=document.activeElement,s=window.getSelection&&window.getSelection();
  if(a&&live.contains(a)&&/^(SELECT|INPUT|TEXTAREA|BUTTON)$/.test(a.tagName))return true;
  return !!(s&&!s.isCollapsed&&s.anchorNode&&live.contains(s.anchorNode))}
function refusal(r,t){
  var d=new DOMParser().parseFromString(t,'text/html');
  var h=d.querySelector('h1'),p=d.querySelector('.box p');
  return 'the server answered '+r.status+': '+((h&&h.textContent)||r.statusText||'error')
    +(p&&p.textContent?' - '+p.textContent:'')}
function pull(){
  if(busy)return;busy=true;
  fetch(live.dataset.src,{credentials:'same-origin',cache:'no-store'}).then(function(r){
    return r.text().then(function(t){
      if(!r.ok){failed(refusal(r,t));return}
      var n=Date.parse(r.headers.get('%(header)s')||'');if(!isNaN(n))skew=n-Date.now();
      fails=0;st.className='muted';live.classList.remove('stale');
      if(busyUser()){held=true;tick();return}
      okAt=Date.now();held=false;if(t!==last){live.innerHTML=t;last=t}
      live.dataset.fetches=(+(live.dataset.fetches||0)+1);tick()})
  }).catch(function(e){failed('the server did not answer ('+e+')')})
  .then(function(){busy=false})}
var n0=Date.parse(live.dataset.now||'');if(!isNaN(n0))skew=n0-Date.now();
tick();setInterval(tick,1000);setInterval(pull,every*1000);})();</script>"""


def live_page_body(header: str, content: str, src: str, now_iso: str) -> str:
    """The page's body: `header`, the status line, the live content and its script."""
    return (
        header + f"<p id='live-status' class='muted'>As of {_e(now_iso)} (UTC); this page updates "
        f"itself every {FETCH_S} s (without JavaScript it reloads every {REFRESH_S} s).</p>"
        + f"<div id='live' data-src='{_e(src)}' data-now='{_e(now_iso)}'>{content}</div>"
        + SCRIPT % {"every": FETCH_S, "header": NOW_HEADER}
    )
