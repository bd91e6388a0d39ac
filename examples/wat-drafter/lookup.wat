;; lookup: a minfer drafter plugin written in WebAssembly text from sdk/ABI.md alone
;; (ABI v1.2, role drafter). It keeps the sequence it is told, finds the latest earlier
;; occurrence of the last token and proposes the tokens that followed it (prompt lookup
;; with n = 1), each with confidence 0.5. No language runtime, no imports.
;;
;; Build (wabt): wat2wasm lookup.wat -o lookup.wasm
;;
;; Memory (one linear memory, grown as needed):
;;   0      info record (43 bytes)         1024   last error message
;;   4096   response (8 + 8·1024 bytes)   16384  request buffer (up to 1 MiB - 16384)
;;   1 MiB  the sequence, i32 per token, growing
(module
  (memory (export "memory") 17)
  (global $len (mut i32) (i32.const 0)) ;; tokens of the sequence kept

  (data (i32.const 0)
    "\10\00\00\00\01\00\02\00\01\00\00\00\10\00\00\00\08\00\00\00\00\00\00\00\06\00\00\00\05\00\00\00lookup0.1.0")
  (data (i32.const 1024) "malformed draft request")

  (func $pack (param $ptr i32) (param $n i32) (result i64)
    (i64.or (i64.shl (i64.extend_i32_u (local.get $ptr)) (i64.const 32))
            (i64.extend_i32_u (local.get $n))))

  ;; grow memory so that [0, end) is inside it; false when it cannot
  (func $reserve (param $end i32) (result i32)
    (local $need i32)
    (local.set $need (i32.sub (i32.shr_u (i32.add (local.get $end) (i32.const 65535)) (i32.const 16))
                              (memory.size)))
    (if (i32.gt_s (local.get $need) (i32.const 0))
      (then (return (i32.ne (memory.grow (local.get $need)) (i32.const -1)))))
    (i32.const 1))

  (func (export "minfer_abi_v1") (result i32) (i32.const 2))
  (func (export "minfer_info") (result i64) (call $pack (i32.const 0) (i32.const 43)))
  (func (export "minfer_last_error") (result i64) (call $pack (i32.const 1024) (i32.const 23)))

  (func (export "minfer_alloc") (param $size i32) (result i32)
    (if (i32.gt_u (local.get $size) (i32.const 1032192)) (then (return (i32.const 0))))
    (if (i32.eqz (call $reserve (i32.add (i32.const 16384) (local.get $size)))) (then (return (i32.const 0))))
    (i32.const 16384))
  (func (export "minfer_free") (param i32 i32))

  ;; every init starts a fresh plugin: forget the sequence (there are no params to read)
  (func (export "minfer_init") (param i32 i32) (result i32)
    (global.set $len (i32.const 0))
    (i32.const 0))

  (func (export "minfer_draft") (param $ptr i32) (param $n i32) (result i64)
    (local $hdr i32) (local $max i32) (local $add i32) (local $last i32)
    (local $i i32) (local $k i32) (local $out i32)
    (if (i32.lt_u (local.get $n) (i32.const 16)) (then (return (i64.const -1))))
    (local.set $hdr (i32.load (local.get $ptr)))
    (local.set $max (i32.load (i32.add (local.get $ptr) (i32.const 4))))
    (local.set $add (i32.load (i32.add (local.get $ptr) (i32.const 12))))
    ;; the appended tokens must lie inside the request: hdr + 4·n ≤ len
    (if (i32.or (i32.lt_u (local.get $hdr) (i32.const 16))
                (i64.gt_u (i64.add (i64.extend_i32_u (local.get $hdr))
                                   (i64.shl (i64.extend_i32_u (local.get $add)) (i64.const 2)))
                          (i64.extend_i32_u (local.get $n))))
      (then (return (i64.const -1))))
    (if (i32.eqz (call $reserve (i32.add (i32.const 1048576)
                                 (i32.shl (i32.add (global.get $len) (local.get $add)) (i32.const 2)))))
      (then (return (i64.const -1))))
    (memory.copy (i32.add (i32.const 1048576) (i32.shl (global.get $len) (i32.const 2)))
                 (i32.add (local.get $ptr) (local.get $hdr))
                 (i32.shl (local.get $add) (i32.const 2)))
    (global.set $len (i32.add (global.get $len) (local.get $add)))
    (local.set $k (i32.const 0))
    (if (i32.ge_u (global.get $len) (i32.const 2))
      (then
        (local.set $last (i32.load (i32.add (i32.const 1048576)
                                            (i32.shl (i32.sub (global.get $len) (i32.const 1)) (i32.const 2)))))
        ;; the latest earlier occurrence of the last token
        (local.set $i (i32.sub (global.get $len) (i32.const 2)))
        (block $found
          (loop $scan
            (br_if $found (i32.eq (i32.load (i32.add (i32.const 1048576) (i32.shl (local.get $i) (i32.const 2))))
                                  (local.get $last)))
            (if (i32.eqz (local.get $i)) (then (local.set $i (i32.const -1)) (br $found)))
            (local.set $i (i32.sub (local.get $i) (i32.const 1)))
            (br $scan)))
        ;; propose what followed it, up to max tokens and the end of the sequence
        (if (i32.ge_s (local.get $i) (i32.const 0))
          (then
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (block $done
              (loop $copy
                (br_if $done (i32.ge_u (local.get $k) (local.get $max)))
                (br_if $done (i32.ge_u (local.get $i) (global.get $len)))
                (i32.store (i32.add (i32.const 4104) (i32.shl (local.get $k) (i32.const 2)))
                           (i32.load (i32.add (i32.const 1048576) (i32.shl (local.get $i) (i32.const 2)))))
                (local.set $i (i32.add (local.get $i) (i32.const 1)))
                (local.set $k (i32.add (local.get $k) (i32.const 1)))
                (br $copy)))))))
    ;; the confidences follow the tokens: k × 0.5
    (local.set $out (i32.add (i32.const 4104) (i32.shl (local.get $k) (i32.const 2))))
    (local.set $i (i32.const 0))
    (block $done
      (loop $conf
        (br_if $done (i32.ge_u (local.get $i) (local.get $k)))
        (f32.store (i32.add (local.get $out) (i32.shl (local.get $i) (i32.const 2))) (f32.const 0.5))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $conf)))
    (i32.store (i32.const 4096) (i32.const 8))
    (i32.store (i32.const 4100) (local.get $k))
    (call $pack (i32.const 4096) (i32.add (i32.const 8) (i32.shl (local.get $k) (i32.const 3)))))
)
