"""Paged-attention decode in Triton: one program per (sequence, kv head), whole GQA group."""

import torch
import triton
import triton.language as tl


@triton.jit
def _attn(
    q,
    kc,
    vc,
    bt,
    sl,
    o,
    scale,
    sq0,
    sq1,
    sq2,
    sk0,
    sk1,
    sk2,
    sk3,
    sv0,
    sv1,
    sv2,
    sv3,
    sb0,
    sb1,
    so0,
    so1,
    so2,
    G: tl.constexpr,
    GP: tl.constexpr,
    D: tl.constexpr,
    DP: tl.constexpr,
    BS: tl.constexpr,
    TN: tl.constexpr,
):
    s = tl.program_id(0)
    kh = tl.program_id(1)
    g = tl.arange(0, GP)
    d = tl.arange(0, DP)
    gm = g < G
    dm = d < D
    h = kh * G + g
    qm = gm[:, None] & dm[None, :]
    qt = tl.load(q + s * sq0 + h[:, None] * sq1 + d[None, :] * sq2, mask=qm, other=0.0)
    qt = qt.to(tl.float32)
    n = tl.load(sl + s)
    mx = tl.full([GP], float("-inf"), tl.float32)
    den = tl.zeros([GP], tl.float32)
    acc = tl.zeros([GP, DP], tl.float32)
    ar = tl.arange(0, TN)
    for st in range(0, n, TN):
        p = st + ar
        pm = p < n
        blk = tl.load(bt + s * sb0 + (p // BS) * sb1, mask=pm, other=0).to(tl.int64)
        off = p % BS
        lm = pm[:, None] & dm[None, :]
        kp = kc + (blk * sk0 + off * sk1 + kh * sk2)[:, None] + d[None, :] * sk3
        k = tl.load(kp, mask=lm, other=0.0).to(tl.float32)
        sc = tl.sum(qt[:, None, :] * k[None, :, :], axis=2) * scale
        sc = tl.where(pm[None, :], sc, float("-inf"))
        nm = tl.maximum(mx, tl.max(sc, axis=1))
        a = tl.exp(mx - nm)
        w = tl.exp(sc - nm[:, None])
        den = den * a + tl.sum(w, axis=1)
        vp = vc + (blk * sv0 + off * sv1 + kh * sv2)[:, None] + d[None, :] * sv3
        v = tl.load(vp, mask=lm, other=0.0).to(tl.float32)
        acc = acc * a[:, None] + tl.sum(w[:, :, None] * v[None, :, :], axis=1)
        mx = nm
    res = acc / tl.where(den > 0, den, 1.0)[:, None]
    op = o + s * so0 + h[:, None] * so1 + d[None, :] * so2
    tl.store(op, res.to(o.dtype.element_ty), mask=qm)


def paged_attention_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    ns, nh, hd = q.shape
    bs, nkv = k_cache.shape[1], k_cache.shape[2]
    g = nh // nkv
    if scale is None:
        scale = hd**-0.5
    gp = triton.next_power_of_2(g)
    dp = triton.next_power_of_2(hd)
    tn = max(16, min(64, 8192 // (gp * dp)))
    o = q.new_empty((ns, nh, hd))
    _attn[(ns, nkv)](
        q,
        k_cache,
        v_cache,
        block_tables,
        seq_lens,
        o,
        float(scale),
        *q.stride(),
        *k_cache.stride(),
        *v_cache.stride(),
        *block_tables.stride(),
        *o.stride(),
        G=g,
        GP=gp,
        D=hd,
        DP=dp,
        BS=bs,
        TN=tn,
    )
    return o
