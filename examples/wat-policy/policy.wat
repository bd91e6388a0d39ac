;; wat-policy: a minfer depth policy written by hand in WebAssembly text, from
;; sdk/ABI.md alone (no Go, no runtime, no WASI imports). Build it with wabt:
;;
;;   wat2wasm policy.wat -o wat-policy.wasm
;;   minfer plugin check wat-policy.wasm
;;
;; The policy: the first round drafts 2 tokens; after a round whose every drafted token
;; was accepted it drafts one more, after a rejection as many as were accepted (at least
;; 1); a round that drafted nothing keeps the depth. The answer is capped by the
;; request's max_depth. It answers no early-exit cut-off (min_conf 0): the host applies
;; [spec] min_conf and keep_cut itself (ABI.md, "What the host applies"). It reads no
;; params: the host merges keys such as draft_max and min_conf into every policy's
;; params, and a policy ignores the keys it does not know.

(module
  ;; ABI.md, "Module requirements": export the linear memory as "memory". Two pages
  ;; (64 KiB each): the first holds the fixed data below, the second starts the heap
  ;; minfer_alloc hands out, grown on demand.
  (memory (export "memory") 2)

  ;; Memory map (fixed addresses, so no allocator state is needed for them):
  ;;   1024  the info record (47 bytes)
  ;;   1280  the policy response buffer (16 bytes)
  ;;   1536  the last error message
  ;;   65536 the heap minfer_alloc hands out

  ;; Info record (ABI.md, "Info record"): hdr 16, ABI 1.1, one plugin, entry_hdr 16;
  ;; the entry: roles = bit 0 (policy), needs 0, name_len 10, version_len 5, then the
  ;; name and the version.
  (data (i32.const 1024)
    "\10\00\00\00"  ;; hdr = 16
    "\01\00"        ;; ABI major 1
    "\01\00"        ;; ABI minor 1 (equals minfer_abi_v1's answer)
    "\01\00\00\00"  ;; n_plugins = 1
    "\10\00\00\00"  ;; entry_hdr = 16
    "\01\00\00\00"  ;; roles: policy
    "\00\00\00\00"  ;; needs: 0 (not a sampler)
    "\0a\00\00\00"  ;; name_len = 10
    "\05\00\00\00"  ;; version_len = 5
    "wat-policy"
    "0.1.0")
  (data (i32.const 1536) "unknown plugin name")

  (global $heap (mut i32) (i32.const 65536)) ;; next free heap byte
  (global $cur (mut i32) (i32.const 2))      ;; the depth the next round drafts
  (global $errLen (mut i32) (i32.const 0))

  ;; packed returns (ptr << 32) | len as an i64 (ABI.md, "Exports").
  (func $packed (param $ptr i32) (param $len i32) (result i64)
    (i64.or (i64.shl (i64.extend_i32_u (local.get $ptr)) (i64.const 32))
            (i64.extend_i32_u (local.get $len))))

  ;; The ABI minor version this module speaks: 1 (a 1.2 host loads it).
  (func (export "minfer_abi_v1") (result i32) (i32.const 1))

  (func (export "minfer_info") (result i64)
    (call $packed (i32.const 1024) (i32.const 47)))

  ;; A bump allocator: the host allocates a request block once and reuses it, so
  ;; freeing nothing costs nothing. It grows memory when a request needs more; 0 on
  ;; failure (memory.grow answers -1 beyond the host's cap).
  (func (export "minfer_alloc") (param $size i32) (result i32)
    (local $p i32) (local $end i32)
    (local.set $p (global.get $heap))
    (local.set $end (i32.add (local.get $p) (local.get $size)))
    (if (i32.gt_u (local.get $end) (i32.mul (memory.size) (i32.const 65536)))
      (then
        (if (i32.lt_s
              (memory.grow (i32.shr_u (i32.add (i32.sub (local.get $end) (i32.mul (memory.size) (i32.const 65536))) (i32.const 65535)) (i32.const 16)))
              (i32.const 0))
          (then (return (i32.const 0))))))
    (global.set $heap (local.get $end))
    (local.get $p))

  (func (export "minfer_free") (param $ptr i32) (param $size i32))

  ;; Init request (ABI.md, "Init request"): u32 hdr, u32 name_len, u32 params_len, then
  ;; the name at offset hdr and the params after it. Each init starts a fresh plugin,
  ;; so the state is reset here. The name must be "wat-policy".
  (func (export "minfer_init") (param $ptr i32) (param $len i32) (result i32)
    (local $name i32)
    (if (i32.lt_u (local.get $len) (i32.const 12)) (then (return (i32.const 1))))
    (local.set $name (i32.add (local.get $ptr) (i32.load (local.get $ptr))))
    (if (i32.or
          (i32.ne (i32.load offset=4 (local.get $ptr)) (i32.const 10))
          (i32.or
            (i64.ne (i64.load (local.get $name)) (i64.load (i32.const 1056)))          ;; "wat-poli"
            (i32.ne (i32.load16_u offset=8 (local.get $name)) (i32.load16_u (i32.const 1064))))) ;; "cy"
      (then
        (global.set $errLen (i32.const 19))
        (return (i32.const 1))))
    (global.set $cur (i32.const 2))
    (global.set $errLen (i32.const 0))
    (i32.const 0))

  (func (export "minfer_last_error") (result i64)
    (call $packed (i32.const 1536) (global.get $errLen)))

  ;; Policy request (ABI.md, "Policy request"): hdr, round, depth, drafted, accepted,
  ;; max_depth at offsets 0..20 (the fields this policy reads; a newer host's longer
  ;; header changes none of them). Policy response: hdr 16, depth, min_conf 0, flags 0.
  (func (export "minfer_policy_next") (param $ptr i32) (param $len i32) (result i64)
    (local $round i32) (local $drafted i32) (local $accepted i32) (local $max i32) (local $d i32)
    (if (i32.lt_u (local.get $len) (i32.const 24)) (then (return (i64.const -1))))
    (local.set $round (i32.load offset=4 (local.get $ptr)))
    (local.set $drafted (i32.load offset=12 (local.get $ptr)))
    (local.set $accepted (i32.load offset=16 (local.get $ptr)))
    (local.set $max (i32.load offset=20 (local.get $ptr)))
    (if (i32.lt_s (local.get $round) (i32.const 0))
      (then (global.set $cur (i32.const 2)))
      (else
        (if (i32.gt_s (local.get $drafted) (i32.const 0))
          (then
            (if (i32.eq (local.get $accepted) (local.get $drafted))
              (then (global.set $cur (i32.add (global.get $cur) (i32.const 1))))
              (else (global.set $cur
                      (select (local.get $accepted) (i32.const 1)
                              (i32.gt_s (local.get $accepted) (i32.const 1))))))))))
    ;; never let the state run past the bound: a round after max_depth grew back
    ;; starts from it, not from a depth no round could draft
    (if (i32.gt_s (local.get $max) (i32.const 0))
      (then (if (i32.gt_s (global.get $cur) (local.get $max))
        (then (global.set $cur (local.get $max))))))
    (local.set $d (global.get $cur))
    (if (i32.gt_s (local.get $d) (local.get $max))
      (then (local.set $d (select (local.get $max) (i32.const 0) (i32.gt_s (local.get $max) (i32.const 0))))))
    (i32.store (i32.const 1280) (i32.const 16))            ;; hdr
    (i32.store (i32.const 1284) (local.get $d))             ;; depth
    (f32.store (i32.const 1288) (f32.const 0))              ;; min_conf: none of its own
    (i32.store (i32.const 1292) (i32.const 0))              ;; flags
    (call $packed (i32.const 1280) (i32.const 16)))
)
