# ruff: noqa: RUF001 -- Chinese text takes full-width punctuation, not ASCII's.
"""What the checks and the grader say, in Chinese: each English message template, its Chinese one.

A template is a message as the kit writes it, each variable part named in braces; the Chinese
template holds the same names (the tests check it). `messages.translated_message` matches a
message against the English templates and fills in the Chinese one; a variable part that is itself
a message of this catalog (a call described in words, a reason, a scheduler step) is translated
in turn, and one that is code, a number or a candidate's own text stays as it is. Names ending in
`_list` hold items joined by "; ", each translated. Every message written in `grader/checks` and
every flag of the source scan (`grader/scan.py`) has its template here
(`tests/end_to_end/test_messages.py` reads them all); so do grade-all's words on the
leaderboard. `SIMULATION`, apart, holds the words of the kit's simulation, for its page.
"""

from grader.parts import PARTS

ZH_LIST_SEPARATOR = "；"  # between the items of a `_list` part, in place of "; "
FULL_WIDTH_MARKS = tuple("，。：；（）！？、")  # Chinese text has no space beside them

# -- grader/checks/support: shared assertions, the manager's model, the scheduler's traces ------
SUPPORT = {
    "{call} must raise {kind}, but raised {error}": "{call} 应抛出 {kind}，实际抛出了 {error}",
    "{call} must raise {kind}, but returned normally": "{call} 应抛出 {kind}，却正常返回了",
    "{what} must return a list, got {type}": "{what} 应返回 list，实际得到 {type}",
    "{what} must return ints, got {value}": "{what} 应返回由 int 组成的列表，实际得到 {value}",
    "{what} must be an int, got {value}": "{what} 应是 int，实际得到 {value}",
    "{call}, with {what},": "{call}（{what}）",
    "{call} (which raised)": "{call}（抛出了异常）",
    "a call that raises must leave everything as it was": "抛出异常的调用不得改变任何状态",
    "a call may change only the request it is given": "一次调用只能改变传给它的那个请求",
    "{call} must succeed ({why}), but raised {error}": (
        "{call} 应当成功（{why}），实际抛出了 {error}"
    ),
    "{name}.block_table must be a list of ints, got {table}": (
        "{name}.block_table 应是由 int 组成的列表，实际得到 {table}"
    ),
    "{what} must return a tensor, got {got}": "{what} 应返回 tensor，实际得到 {got}",
    "{what} must return float32 rows, got {dtype}": "{what} 应返回 float32 的行，实际得到 {dtype}",
    "{what} must have shape {dims} = {shape}, got {got}": (
        "{what} 的形状应为 {dims} = {shape}，实际为 {got}"
    ),
    "{what}: row {i} is {got}, expected {expected} (token {i} lives in block "
    "block_table[{index}] = {block} at offset {offset}); {wrong} of {total} rows are wrong": (
        "{what}：第 {i} 行是 {got}，应为 {expected}（token {i} 位于块 block_table[{index}] = "
        "{block} 的偏移 {offset} 处）；{total} 行中有 {wrong} 行不对"
    ),
    "{what} must be a LongTensor (int64), got {dtype}": (
        "{what} 应是 LongTensor（int64），实际得到 {dtype}"
    ),
    "{what}[{i}] is {got}, expected block_table[{i} // {size}] * {size} + {i} % {size} = "
    "{block} * {size} + {offset} = {slot}": (
        "{what}[{i}] 是 {got}，应为 block_table[{i} // {size}] * {size} + {i} % {size} = "
        "{block} * {size} + {offset} = {slot}"
    ),
    "{call}, which needs {needed} blocks with {free} free,": (
        "{call}（需要 {needed} 个块，但只有 {free} 个空闲）"
    ),
    "{call} raised but left {name} with seq_len, block_table = {got}, not ({prompt_len}, []) "
    "({hint})": (
        "{call} 抛出了异常，但 {name} 的 seq_len, block_table 成了 {got}，而不是 "
        "({prompt_len}, [])（{hint}）"
    ),
    "it needs {needed} of the {free} free blocks": "它需要 {free} 个空闲块中的 {needed} 个",
    "{call} must give {name} ceil(seq_len / block_size) = ceil({prompt_len} / {size}) = "
    "{needed} blocks, got block_table {table}": (
        "{call} 应给 {name} 分配 ceil(seq_len / block_size) = ceil({prompt_len} / {size}) = "
        "{needed} 个块，实际得到 block_table {table}"
    ),
    "{call} holds blocks {table}": "{call} 持有块 {table}",
    "{call}, on a non-empty block_table,": "{call}（block_table 非空）",
    "starts a new block": "开启一个新块",
    "goes into shared block {block}": "要写入共享块 {block}",
    "{call}, whose token {position} {why}, with no block free,": (
        "{call}（它的 token {position} {why}，而没有空闲块）"
    ),
    "{call} must add one to seq_len ({before} -> {after}), got {got}": (
        "{call} 应让 seq_len 加一（{before} -> {after}），实际得到 {got}"
    ),
    "token {position} starts a new block ({again} % block_size {size} == 0): {call} must append "
    "one free block to block_table {table}, got {new}": (
        "token {position} 开启一个新块（{again} % block_size {size} == 0）：{call} 应在 "
        "block_table {table} 末尾追加一个空闲块，实际得到 {new}"
    ),
    "token {position} goes into block {block}, which {sharers} also holds and which is not "
    "full: {call} must first copy it into a free block (copy-on-write) in its place, so "
    "block_table {table} must become {kept} + [a free block], got {new}": (
        "token {position} 要写入块 {block}，而 {sharers} 也持有这个块，且它还没写满：{call} "
        "应先把它复制到一个空闲块，用新块替换它（写时复制），所以 block_table {table} 应变为 "
        "{kept} + [一个空闲块]，实际得到 {new}"
    ),
    "{call} (which copied block {block} into block {copy})": (
        "{call}（把块 {block} 复制到了块 {copy}）"
    ),
    "token {position} goes into the last block ({again} % block_size {size} != 0, and no other "
    "request holds it): {call} must leave block_table {table} as it is, got {new}": (
        "token {position} 写入最后一个块（{again} % block_size {size} != 0，且没有其他请求"
        "持有它）：{call} 不应改变 block_table {table}，实际得到 {new}"
    ),
    "token {position} starts a new block, and {free} blocks are free": (
        "token {position} 开启一个新块，且有 {free} 个空闲块"
    ),
    "token {position} needs a copy of a shared block, and {free} blocks are free": (
        "token {position} 需要复制一个共享块，且有 {free} 个空闲块"
    ),
    "token {position} fits in the last block, which no other request holds": (
        "token {position} 放得进最后一个块，且没有其他请求持有这个块"
    ),
    "{call} must empty {name}.block_table, got {table}": (
        "{call} 应清空 {name}.block_table，实际得到 {table}"
    ),
    "{call} must return the new Request, got {got}": "{call} 应返回新的 Request，实际得到 {got}",
    "{call} must return a request whose request_id, seq_len, block_table are {expected} (the "
    "parent's length and blocks), got {got}": (
        "{call} 返回的请求的 request_id, seq_len, block_table 应为 {expected}（长度和块都与父"
        "请求相同），实际得到 {got}"
    ),
    "{call} handed out a block twice: {blocks}": "{call} 把同一个块分配了两次：{blocks}",
    "{call} handed out block {block}, outside 0..{last}": (
        "{call} 分配出了块 {block}，超出了 0..{last} 的范围"
    ),
    "{call} handed out block {block}, which {holder} holds": (
        "{call} 分配出了块 {block}，而它正被 {holder} 持有"
    ),
    "after {call}, {name}.seq_len is {got}, expected {expected} ({hint})": (
        "执行 {call} 之后，{name}.seq_len 是 {got}，应为 {expected}（{hint}）"
    ),
    "after {call}, {name}.block_table is {got}, expected {expected} ({hint})": (
        "执行 {call} 之后，{name}.block_table 是 {got}，应为 {expected}（{hint}）"
    ),
    "after {call}, len(manager.free_blocks) is {free}, expected {expected}: num_blocks "
    "({num_blocks}) minus the {held} blocks the live requests hold": (
        "执行 {call} 之后，len(manager.free_blocks) 是 {free}，应为 {expected}：即 num_blocks"
        "（{num_blocks}）减去存活请求持有的 {held} 个块"
    ),
    "after {call}, len(manager.free_blocks) is {free}, expected {expected}: num_blocks "
    "({num_blocks}) minus the {held} blocks the live requests hold ({hint})": (
        "执行 {call} 之后，len(manager.free_blocks) 是 {free}，应为 {expected}：即 num_blocks"
        "（{num_blocks}）减去存活请求持有的 {held} 个块（{hint}）"
    ),
    "after {call}, manager.physical_kv_cache must still be a tensor of shape [num_blocks, "
    "block_size, head_dim] = {shape}, got {got}": (
        "执行 {call} 之后，manager.physical_kv_cache 应仍是形状为 [num_blocks, block_size, "
        "head_dim] = {shape} 的 tensor，实际得到 {got}"
    ),
    "after {call}, manager.physical_kv_cache read through {name}.block_table {table}": (
        "执行 {call} 之后，经由 {name}.block_table {table} 读出的 manager.physical_kv_cache"
    ),
    "no request was scheduled in {steps} steps, so there is nothing to judge here (see the "
    "no-deadlock check)": "{steps} 步中没有调度任何请求，这里无从判断（见 no_deadlock 检查）",
    "{what} must be a list of request ids (ints), got {value}": (
        "{what} 应是请求 id（int）组成的列表，实际得到 {value}"
    ),
    "scheduler.step() must return a StepOutput (with scheduled, preempted and finished), got "
    "{out}": (
        "scheduler.step() 应返回 StepOutput（含 scheduled、preempted 和 finished），实际得到 {out}"
    ),
    "scheduled {scheduled}, preempted {preempted}, finished {finished}": (
        "调度 {scheduled}，抢占 {preempted}，完成 {finished}"
    ),
}

# -- part 1: the allocator, its rules and its cost ----------------------------------------------
ALLOCATOR = {
    "allocate handed out an id twice: {ids}": "allocate 把同一个 id 分配了两次：{ids}",
    "the free blocks are wrong: blocks {missing} should be free, blocks {extra} should be held": (
        "空闲块不对：块 {missing} 应当空闲，块 {extra} 应当被占用"
    ),
    "num_blocks is wrong": "num_blocks 不对",
    "a new pool of {n} blocks must have num_free == {free}": (
        "新建的 {n} 块的池应满足 num_free == {free}"
    ),
    "allocate({n}) must return {count} ids, got {ids}": (
        "allocate({n}) 应返回 {count} 个 id，实际得到 {ids}"
    ),
    "allocate({n}) returned an id twice: {ids}": "allocate({n}) 返回了重复的 id：{ids}",
    "allocate({n}) returned an id outside 0..{last}: {ids}": (
        "allocate({n}) 返回了 0..{last} 范围之外的 id：{ids}"
    ),
    "allocate({n}) returned ids already held: {ids}": "allocate({n}) 返回了已被占用的 id：{ids}",
    "num_free must drop by n after allocate(n)": "allocate(n) 之后 num_free 应减少 n",
    "allocate({n}) with {free} free blocks": "只有 {free} 个空闲块时调用 allocate({n})",
    "a refused allocate must not hand out any block": "被拒绝的 allocate 不得分配出任何块",
    "allocate({n}) on a pool of {size} blocks": "在只有 {size} 个块的池上调用 allocate({n})",
    "allocate(0) must return []": "allocate(0) 应返回 []",
    "free(ids) must return each id to the pool": "free(ids) 应把每个 id 都归还到池中",
    "only the freed blocks can be handed out again": "只有被释放的块才能再次分配出去",
    "an id out of range (8)": "含越界的 id 8",
    "a negative id (-1)": "含负数 id -1",
    "an id that is not allocated": "含未分配的 id",
    "the same id twice": "同一个 id 出现两次",
    "free({ids}) raised but still freed a block": "free({ids}) 抛出了异常，却仍释放了块",
    "freeing block {block} a second time": "第二次释放块 {block}",
    "free([-1]) on a full pool (-1 is not a block id, not the last block)": (
        "在已满的池上调用 free([-1])（-1 不是块 id，也不表示最后一个块）"
    ),
    "num_free must equal num_blocks minus the blocks held": (
        "num_free 应等于 num_blocks 减去已占用的块数"
    ),
    "allocate({n}) must give {count} distinct ids: {ids}": (
        "allocate({n}) 应给出 {count} 个互不相同的 id：{ids}"
    ),
    "allocate({n}) handed out ids that were not free: {ids}": (
        "allocate({n}) 分配出了并非空闲的 id：{ids}"
    ),
    "allocate/free, {size}-block pool": "allocate/free，{size} 个块的池",
    "the allocate/free workload": "allocate/free 工作负载",
    "{rounds} allocations of 1 to 15 blocks and their frees, on a {size}-block pool, take "
    "{ratio}x the reference's time (the limit is {limit}x)": (
        "在 {size} 个块的池上，{rounds} 次分配 1 到 15 个块及其释放的耗时是参考实现的 {ratio} 倍"
        "（上限 {limit} 倍）"
    ),
    "allocations and frees on a {size}-block pool take over {limit}x the reference's time: the "
    "cost must not depend on num_blocks": (
        "在 {size} 个块的池上，分配与释放的耗时超过参考实现的 {limit} 倍：开销不应随 "
        "num_blocks 增长"
    ),
    "allocate/free cost growth from {small} to {large} blocks (ratio: the candidate's growth "
    "over the reference's)": (
        "allocate/free 的开销从 {small} 个块到 {large} 个块的增长（比值：提交的增长除以参考实现的）"
    ),
    "allocations and frees cost {growth}x more on {large} blocks than on {small} (the "
    "reference: {reference}x): the cost must not depend on num_blocks (a list.pop(0) or a scan "
    "over the pool?)": (
        "分配与释放在 {large} 个块上的开销是 {small} 个块上的 {growth} 倍（参考实现："
        "{reference} 倍）：开销不应随 num_blocks 增长（是不是用了 list.pop(0)，或者遍历了整个池？）"
    ),
    "the timed work was not done as asked: {misstep}": "计时的工作没有按要求完成：{misstep}",
    "it returned {value}, not a list of the ids of each allocation": (
        "它返回了 {value}，而不是每次分配所得 id 的列表"
    ),
    "allocation {index} (of {size}) handed out {ids}": (
        "第 {index} 次分配（{size} 个块）给出了 {ids}"
    ),
    "allocation {index} (of {size}) handed out {block}, not a free block": (
        "第 {index} 次分配（{size} 个块）分配出了 {block}，它不是空闲块"
    ),
}

# -- parts 2 and 6: the manager, reference counts ------------------------------------------------
MANAGER = {
    "a new KVCacheManager{sizes} must have len(free_blocks) == num_blocks == {n}": (
        "新建的 KVCacheManager{sizes} 应满足 len(free_blocks) == num_blocks == {n}"
    ),
    "KVCacheManager{sizes} must keep (num_blocks, block_size, head_dim) == {kept}, got {got}": (
        "KVCacheManager{sizes} 应保存 (num_blocks, block_size, head_dim) == {kept}，实际得到 {got}"
    ),
    "physical_kv_cache must be a tensor, got {pool}": (
        "physical_kv_cache 应是 tensor，实际得到 {pool}"
    ),
    "physical_kv_cache must be float32 [num_blocks, block_size, head_dim] = {shape}, got "
    "{dtype} {got}": (
        "physical_kv_cache 应是 float32 的 [num_blocks, block_size, head_dim] = {shape}，"
        "实际得到 {dtype} {got}"
    ),
    "a new physical_kv_cache must be all zeros": "新建的 physical_kv_cache 应全为零",
    "a negative prompt_len": "prompt_len 为负数",
    "Request(7, 5) must have request_id 7, seq_len 5 and block_table [], got {got}": (
        "Request(7, 5) 应有 request_id 7、seq_len 5 和 block_table []，实际得到 {got}"
    ),
    "after BlockAllocator({n}), ref_count must be 0 for every block, got {counts}": (
        "BlockAllocator({n}) 之后，每个块的 ref_count 都应为 0，实际为 {counts}"
    ),
    "after {call}, ref_count must be {expected}, got {got}": (
        "执行 {call} 之后，ref_count 应为 {expected}，实际为 {got}"
    ),
    "after {call}, num_free must be {expected}, got {got} (it was {was}; a block is free again "
    "exactly when its ref_count reaches 0)": (
        "执行 {call} 之后，num_free 应为 {expected}，实际为 {got}（之前是 {was}；块的 ref_count "
        "降到 0 时它才恰好重新空闲）"
    ),
    "{call} of a free block": "对空闲块调用 {call}",
    "free({ids}) of a block with {count} references": "对只有 {count} 个引用的块调用 free({ids})",
}

# -- part 3: the gather, the slot mapping and their cost -----------------------------------------
GATHER = {
    "manager.get_physical_cache({name}) against physical_kv_cache.view(-1, head_dim)"
    "[manager.slot_mapping({again})]": (
        "manager.get_physical_cache({name}) 与 physical_kv_cache.view(-1, head_dim)"
        "[manager.slot_mapping({again})] 的对比"
    ),
    "get_physical_cache gave shapes {shapes}, not {expected}": (
        "get_physical_cache 给出的形状是 {shapes}，而不是 {expected}"
    ),
    "slot_mapping gave shapes {shapes}, not {expected}": (
        "slot_mapping 给出的形状是 {shapes}，而不是 {expected}"
    ),
    "its weighted sums over the rows gathered, round by round, are {got}, not {expected}": (
        "它对 gather 所得的行逐轮求出的加权和是 {got}，而不是 {expected}"
    ),
    "its weighted sums over the slots, round by round, are {got}, not {expected}": (
        "它对 slot 逐轮求出的加权和是 {got}，而不是 {expected}"
    ),
    "get_physical_cache, {tokens} tokens in {count} sequences": (
        "get_physical_cache，{count} 个序列共 {tokens} 个 token"
    ),
    "slot_mapping, {tokens} tokens in {count} sequences": (
        "slot_mapping，{count} 个序列共 {tokens} 个 token"
    ),
    "the gather workload": "gather 工作负载",
    "the slot-mapping workload": "slot mapping 工作负载",
    "get_physical_cache of {tokens} tokens takes {ratio}x the reference's time (the limit is "
    "{limit}x): gather whole blocks, no Python loop over tokens": (
        "对 {tokens} 个 token 调用 get_physical_cache 的耗时是参考实现的 {ratio} 倍（上限 {limit} "
        "倍）：应按整块收集，不要在 Python 中逐个 token 循环"
    ),
    "slot_mapping of {tokens} tokens takes {ratio}x the reference's time (the limit is "
    "{limit}x): compute it with tensor ops over the whole block table, no Python loop over "
    "tokens": (
        "对 {tokens} 个 token 计算 slot_mapping 的耗时是参考实现的 {ratio} 倍（上限 {limit} 倍）："
        "应对整个块表用 tensor 运算来算，不要在 Python 中逐个 token 循环"
    ),
}

# -- part 4: the kernel, its correctness and its speed -------------------------------------------
KERNEL = {
    "needs Triton, which installs on Linux only": "需要 Triton，而它只能安装在 Linux 上",
    "needs a CUDA device": "需要 CUDA 设备",
    "paged_attention_decode launched no @triton.jit kernel: the work must be done by a Triton "
    "kernel (a pure-torch answer scores nothing in this part){torch}": (
        "paged_attention_decode 没有启动任何 @triton.jit kernel：计算必须由 Triton kernel 完成"
        "（纯 torch 的实现在这一部分不得分）{torch}"
    ),
    "; it ran {ops} in torch": "；它在 torch 中运行了 {ops}",
    "paged_attention_decode computed attention with torch ({ops}) outside any Triton kernel: "
    "the attention must be computed by a @triton.jit kernel, so this part scores 0 (outside its "
    "kernels a wrapper may only allocate, view, copy, fill and convert tensors, and do integer "
    "bookkeeping on seq_lens and block_tables)": (
        "paged_attention_decode 在 Triton kernel 之外用 torch 计算了注意力（{ops}）：注意力必须由 "
        "@triton.jit kernel 计算，因此这一部分得 0 分（在 kernel 之外，包装函数只能分配、view、"
        "复制、填充和转换 tensor，以及对 seq_lens 和 block_tables 做整数运算）"
    ),
    "paged_attention_decode returned {type}": "paged_attention_decode 返回了 {type}",
    "the output's shape is {shape}, not q's": "输出的形状是 {shape}，与 q 的形状不同",
    "the output is {dtype}, not q's dtype {expected}": (
        "输出是 {dtype}，而不是 q 的 dtype {expected}"
    ),
    "a sequence of length 0 must give zeros": "长度为 0 的序列应输出全零",
    "the output holds NaN or Inf: the kernel read a slot it must not (a tail slot, a block a "
    "padding entry names) or overflowed": (
        "输出中有 NaN 或 Inf：kernel 读取了不该读的槽位（块尾部未用的槽位，或填充项指向的块），"
        "或者发生了溢出"
    ),
    "relative error {error} against the float64 reference (tolerance {tolerance} for {dtype})": (
        "与 float64 参考结果的相对误差为 {error}（{dtype} 的容差为 {tolerance}）"
    ),
    "the worker's reply to a timed batch of {calls} calls is not the kit's tool's (event time, "
    "[{flags}] finite flags, [{rows}, {samples}, {head_dim}] rows): {type}": (
        "工作进程对 {calls} 次调用的计时批次的回复，不是套件工具给出的格式（事件时间、[{flags}] 的"
        "有限值标志、[{rows}, {samples}, {head_dim}] 的行）：{type}"
    ),
    "{shape}: {us} us for {mb} MB is {rate} GB/s, past the copy bandwidth measured here "
    "({copy} GB/s)": (
        "{shape}：{us} 微秒处理 {mb} MB，即 {rate} GB/s，超过了本机实测的拷贝带宽（{copy} GB/s）"
    ),
    "{shape}: {speedup}x faster than the reference": "{shape}：比参考实现快 {speedup} 倍",
    "{shape}: a timed call's output holds NaN or Inf": "{shape}：某次计时调用的输出中有 NaN 或 Inf",
    "{shape}: rows (sequence, head) {rows} of a timed call are off by {error} against the "
    "float64 reference (tolerance {tolerance}); its inputs: "
    "grader.sandbox.tools.gpu_timing.call_inputs(SUITE[{name}], seed={seed}, call={index}, "
    "kv_sets=[make_kv(SUITE[{again}], i, 'cuda') for i in range({sets})])": (
        "{shape}：某次计时调用中（序列，注意力头）为 {rows} 的行与 float64 参考结果相差 {error}"
        "（容差 {tolerance}）；它的输入："
        "grader.sandbox.tools.gpu_timing.call_inputs(SUITE[{name}], seed={seed}, call={index}, "
        "kv_sets=[make_kv(SUITE[{again}], i, 'cuda') for i in range({sets})])"
    ),
    "the worker's reply to the warm-up is malformed: {reply}": (
        "工作进程对预热调用的回复格式不对：{reply}"
    ),
    "{shape}: computed attention with torch ({ops})": "{shape}：用 torch 计算了注意力（{ops}）",
    "{shape}: launched no @triton.jit kernel at this shape": (
        "{shape}：在这个形状上没有启动任何 @triton.jit kernel"
    ),
    "paged_attention_decode, {shape} (32/8 heads, head dim 128, bf16, block 16)": (
        "paged_attention_decode，{shape}（32/8 个注意力头，head_dim 128，bf16，块大小 16）"
    ),
    "paged_attention_decode, geometric mean over the {count} shapes": (
        "paged_attention_decode，{count} 个形状上的几何平均"
    ),
    "the outputs of timed calls are wrong: {wrong_list}": "计时调用的输出不对：{wrong_list}",
    "timing flagged for review, not rewarded: {flag_list}": (
        "计时结果已标记待人工复核，不计分：{flag_list}"
    ),
    "the kernel takes {ratio}x the reference's time (geometric mean over the {count} shapes of "
    "the suite; this tier's limit is {limit}x); slowest: {slowest}": (
        "kernel 的耗时是参考实现的 {ratio} 倍（整套 {count} 个形状上的几何平均；这一档的上限是 "
        "{limit} 倍）；最慢的：{slowest}"
    ),
}

# -- part 5: the scheduler -----------------------------------------------------------------------
SCHEDULER = {
    "no step: every request was reported finished": "没有这一步：所有请求都已报告完成",
    "a negative max_new_tokens": "max_new_tokens 为负数",
    "{tokens} tokens, more than {count} blocks of {size} can ever hold": (
        "共 {tokens} 个 token，超过了 {count} 个大小为 {size} 的块最多能容纳的数量"
    ),
    "has_unfinished() must be False after add_request refused every request: a refused request "
    "is not queued": (
        "add_request 拒绝了所有请求之后，has_unfinished() 应为 False：被拒绝的请求不会进入队列"
    ),
    "its {tokens} tokens fill the {count} blocks of {size} exactly": (
        "它的 {tokens} 个 token 正好填满 {count} 个大小为 {size} 的块"
    ),
    "id {id} waiting": "id {id} 正在等待",
    "id {id} running": "id {id} 正在运行",
    "id {id} finished": "id {id} 已完成",
    "requests 0 and 1 must each finish once within 8 more steps (the duplicates were refused, "
    "so nothing else was queued); they finished {finished}": (
        "请求 0 和 1 应在接下来的 8 步内各完成一次（重复的请求都被拒绝了，队列里没有别的请求）；"
        "实际完成的是 {finished}"
    ),
    "step {step} scheduled request {id}, which was never added": (
        "第 {step} 步调度了请求 {id}，但它从未被加入"
    ),
    "step {step} scheduled request {id} twice ({out}): a request gets at most one token per "
    "step": "第 {step} 步两次调度了请求 {id}（{out}）：一个请求每步最多得到一个 token",
    "step {step} gave request {id} (prompt_len {prompt_len}, max_new_tokens {max_new_tokens}) "
    "token {token}: more than it asked for (a preempted request keeps the tokens it generated, "
    "counted into its prompt, and is done once it holds them all)": (
        "第 {step} 步给了请求 {id}（prompt_len {prompt_len}，max_new_tokens {max_new_tokens}）"
        "第 {token} 个 token：超出了它要的数量（被抢占的请求保留已生成的 token，计入它的 "
        "prompt，拿到全部 token 就算完成）"
    ),
    " (the trace stopped after {steps} steps)": "（请求序列在 {steps} 步后停止）",
    "request {id} (prompt_len {prompt_len}) got {got} of its max_new_tokens = {wanted} "
    "tokens{stopped}": (
        "请求 {id}（prompt_len {prompt_len}）得到了 {got} 个 token，而它的 max_new_tokens = "
        "{wanted}{stopped}"
    ),
    "request {id} got its last token in step {step}, so it must be reported finished in that "
    "step and no other, but was in steps {steps}": (
        "请求 {id} 在第 {step} 步得到最后一个 token，因此应当在这一步、且只在这一步报告完成，"
        "实际报告完成的步骤是 {steps}"
    ),
    "step {step} scheduled {count} requests ({out}), more than max_num_seqs = {limit}": (
        "第 {step} 步调度了 {count} 个请求（{out}），超过了 max_num_seqs = {limit}"
    ),
    "step {step} gave no request a token while requests {ids} were unfinished: a step with work "
    "to do always makes progress (the oldest running request fits alone, so preempting newer "
    "ones always makes room for it; with none running, the whole pool is free and the head of "
    "the queue fits)": (
        "第 {step} 步没有给任何请求生成 token，而请求 {ids} 还没有完成：有工作要做的一步总能"
        "取得进展（最早运行的请求单独总放得下，所以抢占较新的请求总能给它腾出空间；没有请求"
        "在运行时，整个池都空闲，队首的请求一定放得下）"
    ),
    "has_unfinished() returned {answer} right after the requests of step {step} were added: it "
    "must be True while any request waits or runs": (
        "刚加入第 {step} 步的请求后，has_unfinished() 返回了 {answer}：只要还有请求在等待或"
        "运行，它就应为 True"
    ),
    "requests {ids} were never reported finished in {steps} steps (has_unfinished() then said "
    "{answer}); a scheduler that follows the contract finishes this trace within {limit} steps: "
    "one idle step per step before the last arrival, then at least one token per step": (
        "请求 {ids} 在 {steps} 步内始终没有报告完成（当时 has_unfinished() 返回 {answer}）；"
        "符合约定的调度器会在 {limit} 步内处理完这组请求：最后一个请求到达之前，每一步最多空转"
        "一次，之后每步至少生成一个 token"
    ),
    "has_unfinished() returned {answer} after every request was reported finished: it must be "
    "False once nothing waits or runs": (
        "所有请求都报告完成之后，has_unfinished() 返回了 {answer}：没有请求在等待或运行时，"
        "它应为 False"
    ),
    "step {step} admitted request {id} while requests {ids}, which arrived before it, had never "
    "run: waiting requests are admitted first come, first served, and admission stops at the "
    "first one that does not fit": (
        "第 {step} 步准入了请求 {id}，而比它先到的请求 {ids} 还从未运行过：等待中的请求按先到"
        "先服务的顺序准入，遇到第一个放不下的请求就停止准入"
    ),
    "after every request finished, len(manager.free_blocks) is {free}, not num_blocks = "
    "{num_blocks}: a finished or preempted request's blocks must all go back to the pool "
    "(manager.free)": (
        "所有请求完成之后，len(manager.free_blocks) 是 {free}，而不是 num_blocks = {num_blocks}："
        "已完成或被抢占的请求的块都应归还到池中（manager.free）"
    ),
    "step {step} differs from the reference scheduler's:\n  expected: {expected}\n"
    "  got:      {got}": "第 {step} 步与参考调度器的不同：\n  应为：{expected}\n  实际：{got}",
    # a counterexample's `# fails:` line holds a message's first line only
    "step {step} differs from the reference scheduler's:": "第 {step} 步与参考调度器的不同：",
}

# -- the grader: how a check fails, is skipped or cut short; timings; notes on a part ------------
GRADER = {
    "unexpected exception from the submission: {error}": "提交的代码抛出了意外的异常：{error}",
    "the grader failed in this check: {error}": "评分器在这项检查中出错：{error}",
    "not implemented: {failure}": "尚未实现：{failure}",
    "{call} raises NotImplementedError": "{call} 抛出了 NotImplementedError",
    "not submitted: {failure}": "未提交：{failure}",
    "{file} was not submitted": "没有提交 {file}",
    "import failed: {failure}": "导入失败：{failure}",
    "{file} could not be imported: {error}": "无法导入 {file}：{error}",
    "{file} is not run: {reason}": "{file} 不会被运行：{reason}",
    "line {line} reads {name}, which runs code decoded at run time": (
        "第 {line} 行用到了 {name}，它会运行在运行时解码出的代码"
    ),
    "too deeply nested for the grader to read what it runs": "嵌套太深，评分器无法读出它运行什么",
    "crashed: {failure}": "崩溃：{failure}",
    "the worker process {how}{tail}": "工作进程{how}{tail}",
    "was killed by signal {signal}": "被信号 {signal} 终止",
    "was killed by signal {signal} (out of memory?)": "被信号 {signal} 终止（内存不足？）",
    "exited with status {status}": "以状态码 {status} 退出",
    "the worker closed its reply channel{tail}": "工作进程关闭了回复通道{tail}",
    "; its last output:\n{output}": "；它最后的输出：\n{output}",
    "timed out: {failure}": "超时：{failure}",
    "the part's time budget ({seconds} s) is spent": "这一部分的时间预算（{seconds} 秒）已用完",
    "the call did not return in time (an infinite loop?)": "调用没有按时返回（死循环？）",
    "not called: {count} calls in this part did not return in time already": (
        "未调用：这一部分已有 {count} 次调用没有按时返回"
    ),
    "not called again: a call of it did not return in time earlier in this grading": (
        "不再调用：这次评分中它之前有一次调用没有按时返回"
    ),
    "broke the channel: {failure}": "破坏了通信通道：{failure}",
    "the worker's reply to {call} is malformed: {error}": (
        "工作进程对 {call} 的回复格式不对：{error}"
    ),
    "the worker's reply to {call} is malformed": "工作进程对 {call} 的回复格式不对",
    "the worker's reply is not one the kit's worker sends: {line}": (
        "工作进程的回复不是套件的工作进程会发出的：{line}"
    ),
    "the worker sent more than {size} MiB in one reply": "工作进程的一次回复超过了 {size} MiB",
    "the worker sent more than {values} values or {lists} lists in one reply": (
        "工作进程的一次回复超过了 {values} 个值或 {lists} 个列表"
    ),
    "{what} ran {speedup}x faster than the reference's, which is not plausible: flagged for "
    "review, not rewarded": "{what} 比参考实现快 {speedup} 倍，这不合理：已标记待人工复核，不计分",
    "runs only in the full kit": "只在完整套件中运行",
    "runs only in the full kit: the answer key it is compared with is absent": (
        "只在完整套件中运行：这里没有用来比较的参考答案"
    ),
    "not graded by this version of the kit": "这个版本的套件不评这一部分",
    "checks skipped ({reason_list})": "有检查被跳过（{reason_list}）",
    "scored with the kit's reference {file} in place of yours: your allocator fails allocator "
    "checks (with yours, this part scored {own})": (
        "用套件的参考实现 {file} 代替你的来评分：你的分配器没有通过 allocator 部分的检查"
        "（用你自己的，这一部分得 {own} 分）"
    ),
    "scored with your own {file}, which fails allocator checks: the full kit also grades this "
    "part with its reference one and keeps the better score": (
        "用你自己的 {file} 评分，它没有通过 allocator 部分的检查：完整套件还会用参考实现再评一次，"
        "取较高的分数"
    ),
    "scored with your own {files}: the full kit swaps in its reference ones": (
        "用你自己的 {files} 评分：完整套件会换用它的参考实现"
    ),
    "scored with the kit's reference {files} in place of yours": (
        "用套件的参考实现 {files} 代替你的来评分"
    ),
    # the files a part is scored with in place of the candidate's, as the notes above join them
    **{
        " and ".join(part.swapped): " 和 ".join(part.swapped)
        for part in PARTS.values()
        if len(part.swapped) > 1
    },
    "the grader failed: {traceback}": "评分器出错：{traceback}",
    "the simulation failed: {traceback}": "模拟出错：{traceback}",
    "the engine check failed: {traceback}": "引擎检查出错：{traceback}",
    "grading again with the kit's allocator failed: {traceback}": (
        "换用套件的分配器重新评分时出错：{traceback}"
    ),
    "implausibly fast: {benchmark}": "快得不合理：{benchmark}",
    "and {count} more events from this part's workers": "另有 {count} 个事件来自这一部分的工作进程",
    "tried to import {module} (blocked: the kit is not importable)": (
        "试图导入 {module}（已拦截：不能导入套件）"
    ),
}

# -- how the workers ran: isolated or not --------------------------------------------------------
ISOLATION = {
    "isolated: each worker in its own namespaces ({method})": (
        "已隔离：每个工作进程都在各自的命名空间中运行（{method}）"
    ),
    "not isolated: not for a hiring decision ({reason})": (
        "未隔离：结果不能用于招聘决定（{reason}）"
    ),
    "turned off with --isolation none": "已用 --isolation none 关闭",
    "the CPU parts' workers can start no process (a seccomp filter), so each one's CPU time, its "
    "own clock, and its memory limit ({memory}) cover all it does; the kernel's worker on a CUDA "
    "machine may start processes (Triton runs a compiler), and its limit is per process": (
        "CPU 部分的工作进程不能启动任何进程（seccomp 过滤器），"
        "所以每个工作进程的 CPU 时间（它自己的时钟）和内存限制（{memory}）涵盖它所做的一切；"
        "在 CUDA 机器上，kernel 部分的工作进程可以启动进程（Triton 要运行编译器），"
        "它的限制按进程计"
    ),
    "the workers may start processes (no seccomp filter here): a worker's CPU time counts those "
    "it waited for, and its memory limit ({memory}) is per process": (
        "工作进程可以启动进程（这里没有 seccomp 过滤器）："
        "工作进程的 CPU 时间包括它等待过的子进程，内存限制（{memory}）按进程计"
    ),
    "bubblewrap (bwrap) is not installed": "没有安装 bubblewrap（bwrap）",
    "{bwrap} does not run: {error}": "{bwrap} 无法运行：{error}",
    "bwrap failed: {error}": "bwrap 出错：{error}",
    "bwrap cannot make a sandbox here: {error}": "bwrap 无法在这里创建沙箱：{error}",
}

# -- the source scan's integrity flags (grader/scan.py): what it saw, then why a reviewer looks ---
SCAN = {
    "too deeply nested to scan (read it by hand)": "嵌套太深，无法扫描（请人工阅读）",
    "imports {name} ({reason})": "导入了 {name}（{reason}）",
    "uses {name} ({reason})": "使用了 {name}（{reason}）",
    "uses {name}": "使用了 {name}",
    "assigns {name} ({reason})": "给 {name} 赋值（{reason}）",
    "deletes {name} ({reason})": "删除了 {name}（{reason}）",
    "names {value} ({reason})": "写出了字符串 {value}（{reason}）",
    "uses {name} with a computed name ({reason})": "用运行时算出的名字调用 {name}（{reason}）",
    "uses {function} on {what} ({reason})": "对 {what} 使用了 {function}（{reason}）",
    "an attribute of {target}": "{target} 的某个属性",
    "calls .{method}() ({reason})": "调用了 .{method}()（{reason}）",
    "calls .{method}()": "调用了 .{method}()",
    "uses {name} inside @triton.jit kernel {kernel} ({reason})": (
        "在 @triton.jit kernel {kernel} 内使用了 {name}（{reason}）"
    ),
    "inside @triton.jit kernel {kernel}": "在 @triton.jit kernel {kernel} 内",
    "{what} outside any @triton.jit kernel (attention computed by torch)": (
        "在 @triton.jit kernel 之外{what}（用 torch 计算了注意力）"
    ),
    "uses the @ operator": "使用了 @ 运算符",
    "indexes {name} with a computed index": "用运行时算出的下标索引 {name}",
    # why: the reasons of `scan.MODULES`, `ATTRIBUTES`, `NAMES` and of the kernel file's flags
    "the kit's own code": "套件自身的代码",
    "a ready-made kernel": "现成的 kernel",
    "runs native code": "运行原生代码",
    "can start processes": "可以启动进程",
    "can start threads": "可以启动线程",
    "handles signals": "处理信号",
    "maps memory outside the worker's memory limit": "在工作进程的内存限制之外映射内存",
    "opens connections": "建立网络连接",
    "introspection": "自省",
    "reaches the worker's own code": "触及工作进程自身的代码",
    "file access": "访问文件",
    "runs code from a file": "运行文件中的代码",
    "reads or builds bytecode": "读取或构造字节码",
    "outside the modules the contract lists": "不在合约列出的模块之内",
    "runs a shell command": "执行系统命令",
    "leaves the worker's process group": "脱离工作进程所在的进程组",
    "can end processes": "可以结束进程",
    "makes a special file": "创建特殊文件",
    "loads code from a file": "从文件加载代码",
    "loads code from an archive": "从压缩包加载代码",
    "builds code objects": "构造代码对象",
    "reads module files through their loader": "通过模块的加载器读取模块的文件",
    "runs code from a string": "运行字符串中的代码",
    "imports by name": "按名字导入模块",
    "walks the process's objects: the kit's tools": "遍历进程中的对象，可以触及套件的工具",
    "patches a library": "给库打补丁",
    "reads stack frames": "读取栈帧",
    "reads processes through /proc": "通过 /proc 读取进程信息",
    "dynamic attribute access": "动态访问属性",
    "dynamic attribute access: {reason}": "动态访问属性：{reason}",
    "can switch off the grader's torch dispatch mode": "可以关闭评分器的 TorchDispatchMode",
    "torch internals: can switch off the grader's torch dispatch mode": (
        "torch 的内部接口：可以关闭评分器的 TorchDispatchMode"
    ),
    "Triton's launch machinery: can hide torch work inside a launch": (
        "Triton 的 kernel 启动机制：可以把 torch 的计算藏进一次启动里"
    ),
    "computes outside torch and Triton: {why}": "在 torch 和 Triton 之外计算：{why}",
    "the grader's dispatch mode does not see it": "评分器的 TorchDispatchMode 看不到它",
    "patches Triton: can hide torch work inside a launch": (
        "给 Triton 打补丁：可以把 torch 的计算藏进一次启动里"
    ),
    "patches Triton: can hide torch work": "给 Triton 打补丁：可以藏起 torch 的计算",
    "runs only under Triton's interpreter: {why}": "只在 Triton 的解释器下运行：{why}",
    "a computed name the scan cannot read": "名字在运行时才算出，扫描读不到",
}

# -- grade-all: why a submission has no report, what the drive says of a row (leaderboard.html) --
DRIVE = {
    "exit status {status}": "退出状态码 {status}",
    "exit status 0 but {problem}": "退出状态码为 0，但 {problem}",
    "timed out after {seconds} s": "{seconds} 秒后超时",
    "no report folder: {error}": "无法创建报告文件夹：{error}",
    "interrupted": "已中断",
    "failed {count} times on Ray: {error}": "在 Ray 上失败了 {count} 次：{error}",
    "retried on Ray (attempt {attempt} of {attempts})": (
        "在 Ray 上重试过（第 {attempt} 次尝试，最多 {attempts} 次）"
    ),
    "kept from an earlier run with the same settings": "沿用之前以相同设置评分的结果",
    "mixed: {settings}": "设置与其余报告不同：{settings}",
    "not isolated: not for a hiring decision": "未隔离：结果不能用于招聘决定",
    # a report that cannot be read (`compare.read`), for compare, resume and merge
    "{file} does not exist: give a report.json or the report folder holding one": (
        "{file} 不存在：请给出 report.json 或存放它的报告文件夹"
    ),
    "{file} is not a readable JSON report: {error}": "{file} 不是可读的 JSON 报告：{error}",
    "{file} is not a grade report: it has no parts with checks": (
        "{file} 不是评分报告：其中没有带检查的部分"
    ),
    "{file} is not a grade report: it has no {key}": "{file} 不是评分报告：其中没有 {key}",
}

# -- the end-to-end engine check ----------------------------------------------------------------
ENGINE = {
    "needs {files}, which the submission lacks": "需要 {files}，但提交中没有",
    "calls in {parts} did not return in time: the engine check would wait for them too": (
        "{parts} 中有调用没有按时返回：引擎检查也会一直等下去"
    ),
    "needs Triton for paged_attention.py; it installs on Linux only": (
        "paged_attention.py 需要 Triton，而它只能安装在 Linux 上"
    ),
    "{failure} (a part it needs is still a stub)": "{failure}（它需要的某个部分仍是桩代码）",
    "the engine stopped: {reason}": "引擎停止了：{reason}",
    "serving the trace raised {error}": "处理这组请求时抛出了 {error}",
    "{requests} requests, {tokens} tokens in {steps} steps, {preemptions} preemption(s)": (
        "{requests} 个请求，{steps} 步生成 {tokens} 个 token，抢占 {preemptions} 次"
    ),
    "{summary}: every request got the tokens it gets decoded alone{excused}": (
        "{summary}：每个请求得到的 token 都与单独解码时相同{excused}"
    ),
    ", {count} near-tie(s) excused": "，{count} 处接近平局的差异不计",
    "{summary}: {count} token(s) differ from decoding each request alone with dense attention; "
    "the first at {where}": (
        "{summary}：有 {count} 个 token 与用稠密注意力单独解码每个请求的结果不同；第一处在 {where}"
    ),
    "request {id}, generated token {index} (position {position}): dense decoding gives "
    "{expected}, the engine {got} (dense top-2 margin {margin})": (
        "请求 {id} 生成的第 {index} 个 token（位置 {position}）：稠密解码得到 {expected}，引擎"
        "得到 {got}（稠密解码前两名的差距 {margin}）"
    ),
    "the scheduler has not finished the trace after {steps} steps": (
        "调度器在 {steps} 步之后仍没有处理完这组请求"
    ),
    "request {id} got {got} tokens, not its max_new_tokens {wanted}": (
        "请求 {id} 得到了 {got} 个 token，而不是它的 max_new_tokens {wanted}"
    ),
}

# -- part 7: the prefix cache, its rules and its cost --------------------------------------------
CACHING = {
    "a check's prompt must fit its pool": "检查所用的 prompt 必须放得进它的池",
    "a live id": "一个仍在使用中的 id",
    "an empty prompt": "空 prompt",
    "an unknown id": "未知的 id",
    "an id out of range": "越界的 id",
    "{call}, which needs {needed} new blocks with {takeable} to take,": (
        "{call}（需要 {needed} 个新块，但只能取到 {takeable} 个）"
    ),
    "{call}, whose token starts a new block with no block free,": (
        "{call}（它的 token 开始一个新块，但没有空闲块）"
    ),
    "it needs {needed} blocks beyond its cached prefix": "它在已缓存的前缀之外需要 {needed} 个块",
    "the request is live": "该请求仍在使用中",
    "it needs a free block": "它需要一个空闲块",
    "it needs no block": "它不需要新块",
    "{call} must return {cached}: its first {hits} block(s) are cached (the longest cached run "
    "of full blocks, never the last prompt token), got {got}": (
        "{call} 应返回 {cached}：它的前 {hits} 个块已缓存（已缓存的满块中最长的一串，"
        "永远不含 prompt 的最后一个 token），实际得到 {got}"
    ),
    "{call} must give the request ceil({tokens} / {size}) = {blocks} blocks, got {table}": (
        "{call} 应给该请求 ceil({tokens} / {size}) = {blocks} 个块，实际得到 {table}"
    ),
    "{call}: its cached prefix must be shared, blocks {hits}, got {got}": (
        "{call}：它已缓存的前缀应被共享，即块 {hits}，实际得到 {got}"
    ),
    "{call} must append one block to block table {table}, got {got}": (
        "{call} 应在块表 {table} 末尾添加一个块，实际得到 {got}"
    ),
    "{call} must leave block table {table} as it is, got {got}": (
        "{call} 应保持块表 {table} 不变，实际得到 {got}"
    ),
    "{call} took block {block}, which is not empty (held, cached, taken twice or out of "
    "range), while empty blocks {empty} were there": (
        "{call} 取了块 {block}，它不是空块（被持有、已缓存、被取了两次或越界），"
        "而当时有空块 {empty}"
    ),
    "{call} took block {block}; with no empty block left, it must evict the cached block idle "
    "longest, block {must} (idle, oldest first: {idle})": (
        "{call} 取了块 {block}；没有空块时，它应淘汰空闲最久的已缓存块，即块 {must}"
        "（空闲块，最早的在前：{idle}）"
    ),
    "after {call}, block_table({id}) is {table}, expected {expected} (a call may change only "
    "its own request)": (
        "{call} 之后，block_table({id}) 是 {table}，应为 {expected}（一次调用只能改变它自己的请求）"
    ),
    "after {call}, the blocks' ref_count are {counts}, expected {expected} (how many live "
    "requests hold each)": (
        "{call} 之后，各块的 ref_count 是 {counts}，应为 {expected}（持有每个块的活跃请求数）"
    ),
    "after {call}, num_free is {free}, expected {expected}: the empty blocks plus the "
    "cached-and-idle ones": (
        "{call} 之后，num_free 是 {free}，应为 {expected}：空块加上已缓存且空闲的块"
    ),
    "prefix cache prompt/free, {size}-block pool": "前缀缓存的 prompt/释放，{size} 个块的池",
    "the prompt/free workload": "prompt/释放 工作负载",
    "{rounds} prompts that reuse a cached system prompt and evict {blocks} blocks each, and "
    "their frees, on a {size}-block pool, take {ratio}x the reference's time (the limit is "
    "{limit}x)": (
        "在 {size} 个块的池上，{rounds} 个复用已缓存系统提示词、各淘汰 {blocks} 个块的 prompt "
        "及其释放，耗时是参考实现的 {ratio} 倍（上限 {limit} 倍）"
    ),
    "prefix cache eviction cost growth from {small} to {large} cached blocks (ratio: the "
    "candidate's growth over the reference's)": (
        "前缀缓存的淘汰开销从 {small} 个已缓存块到 {large} 个的增长"
        "（比值：提交的增长除以参考实现的）"
    ),
    "prompts that evict cached blocks cost {growth}x more with {large} cached blocks than with "
    "{small} (the reference: {reference}x): taking a block must not depend on how many are "
    "cached (a scan for the block idle longest?)": (
        "已缓存 {large} 个块时，淘汰已缓存块的 prompt 开销是已缓存 {small} 个块时的 {growth} 倍"
        "（参考实现：{reference} 倍）：取块的开销不应取决于已缓存的块数"
        "（是不是遍历寻找了空闲最久的块？）"
    ),
    "prompts that evict cached blocks take over {limit}x the reference's time with {size} "
    "cached blocks: taking a block must not depend on how many are cached": (
        "已缓存 {size} 个块时，淘汰已缓存块的 prompt 耗时超过参考实现的 {limit} 倍："
        "取块的开销不应取决于已缓存的块数"
    ),
    "it returned {value}": "它返回了 {value}",
    "it returned {count} counts": "它返回了 {count} 个计数",
    "prompt {index} cached {count} tokens in blocks {table}, not {tokens} in {expected} (the "
    "system prompt's, then the blocks idle longest)": (
        "第 {index} 个 prompt 在块 {table} 中缓存了 {count} 个 token，而不是在 {expected} 中缓存 "
        "{tokens} 个（先是系统提示词的块，然后是空闲最久的块）"
    ),
}

# -- the end-to-end prefix-caching check (part 7) ----------------------------------------------
PREFIX_ENGINE = {
    "{requests} requests sharing prefixes, {tokens} tokens generated; {computed} of their "
    "{total} prompt tokens computed, the others read from cached blocks": (
        "{requests} 个共享前缀的请求，生成 {tokens} 个 token；它们的 {total} 个 prompt token "
        "中计算了 {computed} 个，其余从缓存块中读取"
    ),
    "{summary}: each of the {checked} tokens the engine chose is the one dense decoding of its "
    "request alone gives{excused}": (
        "{summary}：引擎选出的 {checked} 个 token 都与用稠密注意力单独解码其请求时相同{excused}"
    ),
    "{summary}: {count} of the {checked} tokens the engine chose differ from decoding each "
    "request alone with dense attention; the first at {where}": (
        "{summary}：引擎选出的 {checked} 个 token 中有 {count} 个与用稠密注意力单独解码每个请求"
        "的结果不同；第一处在 {where}"
    ),
    "{summary}: the cache held none of them, though the prompts share prefixes": (
        "{summary}：这些 prompt 共享前缀，缓存却一个 token 也没有提供"
    ),
    "request {id}, the token after position {position} (of {length} prompt tokens): dense "
    "decoding gives {expected}, the engine {got} (dense top-2 margin {margin})": (
        "请求 {id} 位置 {position} 之后的 token（prompt 共 {length} 个 token）：稠密解码得到 "
        "{expected}，引擎得到 {got}（稠密解码前两名的差距 {margin}）"
    ),
    "the prefix-caching check failed: {traceback}": "前缀缓存检查出错：{traceback}",
    "the trace is not served after {steps} steps": "{steps} 步之后这组请求仍没有处理完",
    "allocate_prompt of request {id} returned {value}, not a number of tokens": (
        "请求 {id} 的 allocate_prompt 返回了 {value}，而不是 token 数"
    ),
    "allocate_prompt of request {id} said {cached} of its {count} prompt tokens are cached: "
    "expected a multiple of the block size {size} below {limit} (the last prompt token is always "
    "computed)": (
        "请求 {id} 的 allocate_prompt 说它的 {count} 个 prompt token 中有 {cached} 个已缓存：应为"
        "块大小 {size} 的倍数且小于 {limit}（prompt 的最后一个 token 总要计算）"
    ),
    "block_table({id}) holds something not a block id": "block_table({id}) 中有不是块 id 的值",
    "request {id} has {count} blocks for {length} tokens": (
        "请求 {id} 有 {length} 个 token，却只有 {count} 个块"
    ),
    "request {id}'s block table {table} leaves the pool": "请求 {id} 的块表 {table} 超出了块池",
    "the engine's report lacks some of {keys}": "引擎的报告缺少 {keys} 中的某些项",
    "the engine's report does not hold max_new_tokens valid tokens for each request": (
        "引擎的报告没有为每个请求给出 max_new_tokens 个有效 token"
    ),
    "the engine's report does not hold, for each request, a number of cached prompt tokens that "
    "is a multiple of the block size below its prompt's length": (
        "引擎的报告没有为每个请求给出已缓存的 prompt token 数（应为块大小的倍数且小于 prompt 长度）"
    ),
    "the engine's report does not hold a valid token for each prompt position it computed": (
        "引擎的报告没有为它计算的每个 prompt 位置给出有效 token"
    ),
}

CHECKS = SUPPORT | ALLOCATOR | MANAGER | GATHER | KERNEL | SCHEDULER | CACHING
MESSAGES = CHECKS | GRADER | ISOLATION | ENGINE | PREFIX_ENGINE | SCAN | DRIVE

# The comments a counterexample's lines end with (`# ...`), as the transcript writes them, and
# the message of its last `assert` where that is a plain string (`Transcript.fail_to_raise`).
COMMENTS = {
    "expected {kind}, got no exception": "应抛出 {kind}，实际没有抛出异常",
    "raises {error}": "抛出 {error}",
    "fails: {message}": "失败：{message}",
    "-> {value}, {launches} Triton kernel launch(es)": (
        "-> {value}，启动了 {launches} 次 Triton kernel"
    ),
    "the calls before, in the grading": "评分时在此之前的调用",
}

# The f-string messages of a counterexample's last `assert` (`transcript.ASSERTS`), as written.
ASSERT_FSTRINGS = {
    "expected {expected!r}, got {got!r}": "应为 {expected!r}，实际为 {got!r}",
    "expected at most {expected!r}, got {got!r}": "应不超过 {expected!r}，实际为 {got!r}",
    "expected not {expected!r}, got {got!r}": "不应为 {expected!r}，实际为 {got!r}",
}

# The kit's simulation (`full_kit/simulate.py`'s `headline`, `rows` and `chart_specs`, stored in
# English in `report.json`), for its page (`grader/report/simulation.py`): each headline line,
# table cell, scheme's name and chart text. Not among `MESSAGES`: no check writes these.
SIMULATION = {
    "Continuous batching (paged, block {size}) against static batching on the same pool: "
    "{paged} against {static} tokens per step ({speedup}x), {paged_steps} against "
    "{static_steps} steps to drain.": (
        "同一个池上，连续批处理（分页，块大小 {size}）与静态批处理相比：每步生成 {paged} 个 token，"
        "静态批处理为 {static} 个（{speedup} 倍）；处理完所有请求需要 {paged_steps} 步，"
        "静态批处理需要 {static_steps} 步。"
    ),
    "Pool holding tokens under load: {contiguous} reserving {max_len} contiguously (paper: "
    "{contiguous_paper}), {paged_pool} paged with blocks of {size} (paper: {paged_paper}).": (
        "负载下池中存有 token 的占比：每个请求连续预留 {max_len} 个 token 时为 {contiguous}"
        "（论文：{contiguous_paper}），以大小为 {size} 的块分页时为 {paged_pool}"
        "（论文：{paged_paper}）。"
    ),
    # the schemes, in the table, the charts' legends and (on two lines) the bar chart's groups
    "static, blocks of {size}": "静态批处理，块大小 {size}",
    "continuous, contiguous: Orca ({name})": "连续批处理，连续预留：Orca ({name})",
    "continuous, paged: block {size}": "连续批处理，分页：块大小 {size}",
    "contiguous\n{name}": "连续预留\n{name}",
    "paged\nblock {size}": "分页\n块大小 {size}",
    # the table's header and cells
    "scheme": "方案",
    "steps": "步数",
    "tokens/step": "每步 token 数",
    "running: mean, max": "运行中的请求：平均，最多",
    "preempted (recomputed)": "抢占次数（重算的 token 数）",
    "slots holding tokens": "存有 token 的槽位占比",
    "pool holding tokens, under load": "负载下池中存有 token 的占比",
    "paper": "论文",
    "{count} ({tokens} tokens)": "{count}（{tokens} 个 token）",
    # the charts' titles, axes and series
    "Tokens generated per step": "每步生成的 token 数",
    "Requests running at once": "同时运行的请求数",
    "KV cache slots holding tokens": "存有 token 的 KV cache 槽位",
    "step (mean over windows of {window} steps)": "decode 步（每 {window} 步取平均）",
    "tokens per step": "每步 token 数",
    "requests holding memory": "占用内存的请求数",
    "of the slots reserved or allocated": "占已预留或已分配槽位的比例",
    "of the whole pool, under load": "占整个池的比例（负载下）",
    "of the KV cache, the vLLM paper's Fig. 2": "占 KV cache 的比例（vLLM 论文图 2）",
    "% of slots": "槽位占比（%）",
}
