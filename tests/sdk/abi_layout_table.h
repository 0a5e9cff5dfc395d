/* The memra C ABI v2 layout on x86_64 LP64 (System V), derived by hand from the
 * headers: pointers/size_t/int64 8 bytes, int32/float 4, natural alignment.
 * Both abi_layout_c.c (C11) and abi_layout_test.cpp (C++20) static_assert every
 * entry, so the two languages and this written-down ABI cannot drift apart.
 * A change here is an ABI change: only append fields (minor) or bump the major. */
#ifndef MEMRA_TEST_ABI_LAYOUT_TABLE_H
#define MEMRA_TEST_ABI_LAYOUT_TABLE_H

/* X(struct, field, offset) */
#define MEMRA_ABI_OFFSETS(X)                                   \
  /* host_api.h */                                             \
  X(memra_device_info, struct_size, 0)                         \
  X(memra_device_info, backend, 8)                             \
  X(memra_device_info, compute_major, 12)                      \
  X(memra_device_info, compute_minor, 16)                      \
  X(memra_device_info, multiprocessor_count, 20)               \
  X(memra_device_info, total_memory_bytes, 24)                 \
  X(memra_device_info, arch, 32)                               \
  X(memra_device_info, name, 40)                               \
  X(memra_buffer, struct_size, 0)                              \
  X(memra_buffer, location, 8)                                 \
  X(memra_buffer, bytes, 16)                                   \
  X(memra_buffer, ptr, 24)                                     \
  X(memra_buffer, host_handle, 32)                             \
  X(memra_launch_config, struct_size, 0)                       \
  X(memra_launch_config, grid, 8)                              \
  X(memra_launch_config, block, 20)                            \
  X(memra_launch_config, shared_bytes, 32)                     \
  X(memra_launch_config, stream, 40)                           \
  X(memra_launch_config, num_args, 48)                         \
  X(memra_launch_config, arg_sizes, 56)                        \
  X(memra_nvrtc_request, struct_size, 0)                       \
  X(memra_nvrtc_request, name, 8)                              \
  X(memra_nvrtc_request, source, 16)                           \
  X(memra_nvrtc_request, options, 24)                          \
  X(memra_nvrtc_request, num_options, 32)                      \
  X(memra_host_api, struct_size, 0)                            \
  X(memra_host_api, abi_major, 8)                              \
  X(memra_host_api, abi_minor, 12)                             \
  X(memra_host_api, ctx, 16)                                   \
  X(memra_host_api, log, 24)                                   \
  X(memra_host_api, error_report, 32)                          \
  X(memra_host_api, config_get, 40)                            \
  X(memra_host_api, device_info_get, 48)                       \
  X(memra_host_api, memory_alloc, 56)                          \
  X(memra_host_api, memory_free, 64)                           \
  X(memra_host_api, kernel_module_load, 72)                    \
  X(memra_host_api, kernel_module_compile, 80)                 \
  X(memra_host_api, kernel_get, 88)                            \
  X(memra_host_api, kernel_launch, 96)                         \
  /* family.h */                                               \
  X(memra_weight, struct_size, 0)                              \
  X(memra_weight, name, 8)                                     \
  X(memra_weight, quant, 16)                                   \
  X(memra_weight, dtype, 24)                                   \
  X(memra_weight, ndim, 28)                                    \
  X(memra_weight, shape, 32)                                   \
  X(memra_weight, bytes, 64)                                   \
  X(memra_weight, data, 72)                                    \
  X(memra_weight_set, struct_size, 0)                          \
  X(memra_weight_set, count, 8)                                \
  X(memra_weight_set, weights, 16)                             \
  X(memra_forward_batch, struct_size, 0)                       \
  X(memra_forward_batch, num_tokens, 8)                        \
  X(memra_forward_batch, token_ids, 16)                        \
  X(memra_forward_batch, positions, 24)                        \
  X(memra_forward_batch, seq_index, 32)                        \
  X(memra_forward_batch, num_seqs, 40)                         \
  X(memra_forward_batch, seq_lens, 48)                         \
  X(memra_forward_batch, block_tables, 56)                     \
  X(memra_forward_batch, max_blocks_per_seq, 64)               \
  X(memra_forward_batch, num_logits, 68)                       \
  X(memra_forward_batch, logits_rows, 72)                      \
  X(memra_forward_batch, logits, 80)                           \
  X(memra_forward_batch, prompt_tokens, 88)                    \
  X(memra_forward_batch, state_slots, 96)                      \
  X(memra_forward_batch, layer_begin, 104)                     \
  X(memra_forward_batch, layer_end, 108)                       \
  X(memra_forward_batch, carry_in, 112)                        \
  X(memra_forward_batch, num_carry_in, 120)                    \
  X(memra_forward_batch, carry_out, 128)                       \
  X(memra_forward_batch, num_carry_out, 136)                   \
  X(memra_forward_batch, row_output, 144)                      \
  X(memra_forward_batch, num_kv_pools, 148)                    \
  X(memra_forward_batch, snapshot_slots, 152)                  \
  X(memra_forward_batch, head, 160)                            \
  X(memra_forward_batch, hidden_in, 168)                       \
  X(memra_forward_batch, hidden_out, 176)                      \
  X(memra_state_group, struct_size, 0)                         \
  X(memra_state_group, kind, 8)                                \
  X(memra_state_group, num_layers, 12)                         \
  X(memra_state_group, layers, 16)                             \
  X(memra_state_group, kv_heads, 24)                           \
  X(memra_state_group, head_dim, 28)                           \
  X(memra_state_group, kv_dtype, 32)                           \
  X(memra_state_group, sliding_window, 36)                     \
  X(memra_state_group, bytes_per_sequence, 40)                 \
  X(memra_state_group, layout, 48)                             \
  X(memra_plan_info, struct_size, 0)                           \
  X(memra_plan_info, vocab_size, 8)                            \
  X(memra_plan_info, num_layers, 16)                           \
  X(memra_plan_info, inputs, 20)                               \
  X(memra_plan_info, num_state_groups, 24)                     \
  X(memra_plan_info, state_groups, 32)                         \
  X(memra_plan_info, num_encoders, 40)                         \
  X(memra_plan_info, encoders, 48)                             \
  X(memra_plan_info, num_required_ops, 56)                     \
  X(memra_plan_info, required_ops, 64)                         \
  X(memra_plan_info, layer_ranges, 72)                         \
  X(memra_plan_info, hidden_width, 76)                         \
  X(memra_plan_info, draft_layers, 80)                         \
  X(memra_op_requirement, struct_size, 0)                      \
  X(memra_op_requirement, name, 8)                             \
  X(memra_op_requirement, version, 16)                         \
  X(memra_family_api, struct_size, 0)                          \
  X(memra_family_api, config_normalize, 8)                     \
  X(memra_family_api, tensor_name, 16)                         \
  X(memra_family_api, plan_create, 24)                         \
  X(memra_family_api, plan_describe, 32)                       \
  X(memra_family_api, plan_info, 40)                           \
  X(memra_family_api, plan_destroy, 48)                        \
  X(memra_family_api, model_create, 56)                        \
  X(memra_family_api, model_forward, 64)                       \
  X(memra_family_api, model_destroy, 72)                       \
  X(memra_family_api, tensor_parts, 80)                        \
  /* quant.h */                                                \
  X(memra_matmul_args, struct_size, 0)                         \
  X(memra_matmul_args, scheme, 8)                              \
  X(memra_matmul_args, backend, 16)                            \
  X(memra_matmul_args, weight, 24)                             \
  X(memra_matmul_args, rows, 32)                               \
  X(memra_matmul_args, cols, 40)                               \
  X(memra_matmul_args, m, 48)                                  \
  X(memra_matmul_args, x, 56)                                  \
  X(memra_matmul_args, y, 64)                                  \
  X(memra_matmul_args, stream, 72)                             \
  X(memra_matmul_args, kernel_data, 80)                        \
  X(memra_kernel_desc, struct_size, 0)                         \
  X(memra_kernel_desc, op, 8)                                  \
  X(memra_kernel_desc, scheme, 16)                             \
  X(memra_kernel_desc, activation, 24)                         \
  X(memra_kernel_desc, arch, 32)                               \
  X(memra_kernel_desc, score, 40)                              \
  X(memra_kernel_desc, matmul, 48)                             \
  X(memra_kernel_desc, kernel_data, 56)                        \
  X(memra_kernel_desc, kernels, 64)                            \
  X(memra_gemv_launch, kernel, 0)                              \
  X(memra_gemv_launch, rows_per_block, 8)                      \
  X(memra_gemv_launch, blocks_per_sm, 12)                      \
  X(memra_gemv_launch, threads, 16)                            \
  X(memra_gemv_mats, w, 0)                                     \
  X(memra_gemv_mats, y, 24)                                    \
  X(memra_gemv_mats, bias, 48)                                 \
  X(memra_gemv_mats, rows, 72)                                 \
  X(memra_gemv_mats, group_end, 96)                            \
  X(memra_matmul_kernels, struct_size, 0)                      \
  X(memra_matmul_kernels, module, 8)                           \
  X(memra_matmul_kernels, block_elems, 16)                     \
  X(memra_matmul_kernels, block_bytes, 24)                     \
  X(memra_matmul_kernels, cols_multiple, 32)                   \
  X(memra_matmul_kernels, gemv_form, 40)                       \
  X(memra_matmul_kernels, by_alignment, 44)                    \
  X(memra_matmul_kernels, gemv, 48)                            \
  X(memra_matmul_kernels, mma_warps, 56)                       \
  X(memra_matmul_kernels, gemm, 60)                            \
  X(memra_matmul_kernels, launch, 64)                          \
  X(memra_matmul_kernels, gemm_dequant, 184)                   \
  X(memra_matmul_kernels, gemm_unit, 192)                      \
  X(memra_matmul_kernels, pdl, 200)                            \
  X(memra_matmul_kernels, embedding, 208)                      \
  X(memra_scheme_info, struct_size, 0)                         \
  X(memra_scheme_info, block_elems, 8)                         \
  X(memra_scheme_info, block_bytes, 16)                        \
  X(memra_scheme_info, prompt, 24)                             \
  X(memra_scheme_info, repack, 28)                             \
  X(memra_scheme_info, sensitive, 32)                          \
  X(memra_scheme_info, fallback, 40)                           \
  X(memra_scheme_info, keep_as_stored, 48)                     \
  X(memra_kernel_registrar, struct_size, 0)                    \
  X(memra_kernel_registrar, registry, 8)                       \
  X(memra_kernel_registrar, device, 16)                        \
  X(memra_kernel_registrar, add, 24)                           \
  X(memra_quant_api, struct_size, 0)                           \
  X(memra_quant_api, weight_bytes, 8)                          \
  X(memra_quant_api, quantize, 16)                             \
  X(memra_quant_api, dequantize, 24)                           \
  X(memra_quant_api, matmul, 32)                               \
  X(memra_quant_api, register_kernels, 40)                     \
  X(memra_quant_api, scheme_info, 48)                          \
  X(memra_quant_api, import_tensor, 56)                        \
  X(memra_checkpoint_tensor, struct_size, 0)                   \
  X(memra_checkpoint_tensor, name, 8)                          \
  X(memra_checkpoint_tensor, dtype, 16)                        \
  X(memra_checkpoint_tensor, ndim, 24)                         \
  X(memra_checkpoint_tensor, shape, 32)                        \
  X(memra_checkpoint_tensor, data, 96)                         \
  X(memra_checkpoint_tensor, bytes, 104)                       \
  X(memra_import_args, struct_size, 0)                         \
  X(memra_import_args, weight, 8)                              \
  X(memra_import_args, siblings, 16)                           \
  X(memra_import_args, sibling_count, 24)                      \
  X(memra_import_args, row0, 32)                               \
  X(memra_import_args, row_count, 40)                          \
  X(memra_import_args, dst, 48)                                \
  X(memra_import_args, dst_bytes, 56)                          \
  X(memra_import_args, scheme, 64)                             \
  X(memra_import_args, rows, 96)                               \
  X(memra_import_args, cols, 104)                              \
  X(memra_import_args, used, 112)                              \
  /* backend.h */                                              \
  X(memra_tensor, struct_size, 0)                              \
  X(memra_tensor, dtype, 8)                                    \
  X(memra_tensor, ndim, 12)                                    \
  X(memra_tensor, shape, 16)                                   \
  X(memra_tensor, data, 48)                                    \
  X(memra_rope_params, struct_size, 0)                         \
  X(memra_rope_params, rotary_dim, 8)                          \
  X(memra_rope_params, neox_style, 12)                         \
  X(memra_rope_params, theta, 16)                              \
  X(memra_rope_params, scaling, 20)                            \
  X(memra_rope_params, factor, 24)                             \
  X(memra_rope_params, low_freq_factor, 28)                    \
  X(memra_rope_params, high_freq_factor, 32)                   \
  X(memra_rope_params, original_max_position, 36)              \
  X(memra_rope_params, beta_fast, 40)                          \
  X(memra_rope_params, beta_slow, 44)                          \
  X(memra_rope_params, attention_factor, 48)                   \
  X(memra_attention_params, struct_size, 0)                    \
  X(memra_attention_params, layer, 8)                          \
  X(memra_attention_params, num_heads, 12)                     \
  X(memra_attention_params, num_kv_heads, 16)                  \
  X(memra_attention_params, head_dim, 20)                      \
  X(memra_attention_params, scale, 24)                         \
  X(memra_attention_params, sliding_window, 28)                \
  X(memra_attention_params, logit_softcap, 32)                 \
  X(memra_attention_params, rope, 40)                          \
  X(memra_attention_params, q_norm, 48)                        \
  X(memra_attention_params, k_norm, 56)                        \
  X(memra_attention_params, qk_norm_eps, 64)                   \
  X(memra_backend_ops, struct_size, 0)                         \
  X(memra_backend_ops, ctx, 8)                                 \
  X(memra_backend_ops, tensor_create, 16)                      \
  X(memra_backend_ops, embedding, 24)                          \
  X(memra_backend_ops, rms_norm, 32)                           \
  X(memra_backend_ops, add_rms_norm, 40)                       \
  X(memra_backend_ops, add, 48)                                \
  X(memra_backend_ops, matmul, 56)                             \
  X(memra_backend_ops, gated_activation, 64)                   \
  X(memra_backend_ops, attention, 72)                          \
  X(memra_backend_ops, gather_logit_rows, 80)                  \
  X(memra_backend_ops, logits_output, 88)                      \
  X(memra_backend_ops, op_find, 96)                            \
  X(memra_backend_ops, op_run, 104)                            \
  X(memra_backend_ops, rows_input, 112)                        \
  X(memra_backend_ops, rows_output, 120)                       \
  X(memra_op_args, struct_size, 0)                             \
  X(memra_op_args, layer, 8)                                   \
  X(memra_op_args, attrs_version, 12)                          \
  X(memra_op_args, attrs, 16)                                  \
  X(memra_op_args, attrs_size, 24)                             \
  X(memra_op_args, num_inputs, 32)                             \
  X(memra_op_args, num_outputs, 36)                            \
  X(memra_op_args, inputs, 40)                                 \
  X(memra_op_args, outputs, 48)                                \
  X(memra_op_args, num_weights, 56)                            \
  X(memra_op_args, weights, 64)                                \
  X(memra_op_args, batch, 72)                                  \
  /* ops.h */                                                  \
  X(memra_moe_ffn_attrs_v2, struct_size, 0)                    \
  X(memra_moe_ffn_attrs_v2, num_experts, 8)                    \
  X(memra_moe_ffn_attrs_v2, top_k, 12)                         \
  X(memra_moe_ffn_attrs_v2, normalize_top_k, 16)               \
  X(memra_moe_ffn_attrs_v2, activation, 20)                    \
  X(memra_moe_ffn_attrs_v2, shared_expert, 24)                 \
  X(memra_op_env, struct_size, 0)                              \
  X(memra_op_env, backend, 8)                                  \
  X(memra_op_env, stream, 16)                                  \
  X(memra_op_env, kernel_data, 24)                             \
  X(memra_op_env, state, 32)                                   \
  X(memra_op_env, state_stride, 40)                            \
  X(memra_op_env, num_state_slots, 48)                         \
  X(memra_op_env, positions, 56)                               \
  X(memra_op_env, seq_index, 64)                               \
  X(memra_op_env, seq_lens, 72)                                \
  X(memra_op_env, state_slots, 80)                             \
  X(memra_op_env, scratch, 88)                                 \
  X(memra_op_env, scratch_ctx, 96)                             \
  X(memra_op_env, snapshot_slots, 104)                         \
  X(memra_op_example, struct_size, 0)                          \
  X(memra_op_example, label, 8)                                \
  X(memra_op_example, attrs, 16)                               \
  X(memra_op_example, attrs_size, 24)                          \
  X(memra_op_example, num_tokens, 32)                          \
  X(memra_op_example, num_seqs, 36)                            \
  X(memra_op_example, positions, 40)                           \
  X(memra_op_example, seq_index, 48)                           \
  X(memra_op_example, state_bytes, 56)                         \
  X(memra_op_example, num_inputs, 64)                          \
  X(memra_op_example, input_shapes, 72)                        \
  X(memra_op_example, inputs, 80)                              \
  X(memra_op_example, num_outputs, 88)                         \
  X(memra_op_example, output_shapes, 96)                       \
  X(memra_op_example, num_weights, 104)                        \
  X(memra_op_example, weight_shapes, 112)                      \
  X(memra_op_example, weights, 120)                            \
  X(memra_op_example, tolerance, 128)                          \
  X(memra_op_def, struct_size, 0)                              \
  X(memra_op_def, name, 8)                                     \
  X(memra_op_def, version, 16)                                 \
  X(memra_op_def, attrs_size, 24)                              \
  X(memra_op_def, flags, 32)                                   \
  X(memra_op_def, summary, 40)                                 \
  X(memra_op_def, run_cpu, 48)                                 \
  X(memra_op_def, prepare_cuda, 56)                            \
  X(memra_op_def, run_cuda, 64)                                \
  X(memra_op_def, example, 72)                                 \
  /* plugin.h */                                               \
  X(memra_plugin_descriptor, struct_size, 0)                   \
  X(memra_plugin_descriptor, abi_major, 8)                     \
  X(memra_plugin_descriptor, abi_minor, 12)                    \
  X(memra_plugin_descriptor, kind, 16)                         \
  X(memra_plugin_descriptor, name, 24)                         \
  X(memra_plugin_descriptor, version, 32)                      \
  X(memra_plugin_descriptor, description, 40)                  \
  X(memra_plugin_descriptor, handles, 48)                      \
  X(memra_plugin_descriptor, score, 56)                        \
  X(memra_plugin_api, struct_size, 0)                          \
  X(memra_plugin_api, kind, 8)                                 \
  X(memra_plugin_api, ctx, 16)                                 \
  X(memra_plugin_api, family, 24)                              \
  X(memra_plugin_api, quant, 32)                               \
  X(memra_plugin_api, shutdown, 40)                            \
  X(memra_plugin_api, num_ops, 48)                             \
  X(memra_plugin_api, ops, 56)

/* X(struct, sizeof, *_STRUCT_SIZE macro, its value). The macro is the size up to the
 * struct's last field in the current minor (v2.0 sizes unless noted), so it is smaller
 * than sizeof when there is tail padding. */
#define MEMRA_ABI_SIZES(X)                                                           \
  X(memra_device_info, 48, MEMRA_DEVICE_INFO_STRUCT_SIZE, 48)                        \
  X(memra_buffer, 40, MEMRA_BUFFER_STRUCT_SIZE, 40)                                  \
  X(memra_launch_config, 64, MEMRA_LAUNCH_CONFIG_STRUCT_SIZE, 64) /* 2.1 */                \
  X(memra_nvrtc_request, 40, MEMRA_NVRTC_REQUEST_STRUCT_SIZE, 40)                    \
  X(memra_host_api, 104, MEMRA_HOST_API_STRUCT_SIZE, 104)                            \
  X(memra_weight, 80, MEMRA_WEIGHT_STRUCT_SIZE, 80)                                  \
  X(memra_weight_set, 24, MEMRA_WEIGHT_SET_STRUCT_SIZE, 24)                          \
  X(memra_forward_batch, 184, MEMRA_FORWARD_BATCH_STRUCT_SIZE, 184) /* 2.9 */     \
  X(memra_state_group, 56, MEMRA_STATE_GROUP_STRUCT_SIZE, 56)                        \
  X(memra_plan_info, 88, MEMRA_PLAN_INFO_STRUCT_SIZE, 84) /* 2.9 */                  \
  X(memra_op_requirement, 24, MEMRA_OP_REQUIREMENT_STRUCT_SIZE, 20) /* 2.1 */        \
  X(memra_family_api, 88, MEMRA_FAMILY_API_STRUCT_SIZE, 88) /* 2.11 */               \
  X(memra_matmul_args, 88, MEMRA_MATMUL_ARGS_STRUCT_SIZE, 88) /* 2.1 */                \
  X(memra_quant_api, 64, MEMRA_QUANT_API_STRUCT_SIZE, 64) /* 2.12 */ \
  X(memra_checkpoint_tensor, 112, MEMRA_CHECKPOINT_TENSOR_STRUCT_SIZE, 112) /* 2.12 */ \
  X(memra_import_args, 120, MEMRA_IMPORT_ARGS_STRUCT_SIZE, 120) /* 2.12 */ \
  X(memra_kernel_desc, 72, MEMRA_KERNEL_DESC_STRUCT_SIZE, 72) /* 2.10 */ \
  X(memra_matmul_kernels, 216, MEMRA_MATMUL_KERNELS_STRUCT_SIZE, 216) /* 2.10 */ \
  X(memra_scheme_info, 56, MEMRA_SCHEME_INFO_STRUCT_SIZE, 52) /* 2.10 */ \
  X(memra_kernel_registrar, 32, MEMRA_KERNEL_REGISTRAR_STRUCT_SIZE, 32) /* 2.1 */                \
  X(memra_tensor, 56, MEMRA_TENSOR_STRUCT_SIZE, 56)                                  \
  X(memra_rope_params, 56, MEMRA_ROPE_PARAMS_STRUCT_SIZE, 52)                        \
  X(memra_attention_params, 72, MEMRA_ATTENTION_PARAMS_STRUCT_SIZE, 68) /* 2.4 */    \
  X(memra_backend_ops, 128, MEMRA_BACKEND_OPS_STRUCT_SIZE, 128) /* 2.9 */            \
  X(memra_op_args, 80, MEMRA_OP_ARGS_STRUCT_SIZE, 80) /* 2.1 */                      \
  X(memra_moe_ffn_attrs_v2, 32, MEMRA_MOE_FFN_ATTRS_V2_STRUCT_SIZE, 28) /* 2.11 */ \
  X(memra_plugin_descriptor, 64, MEMRA_PLUGIN_DESCRIPTOR_STRUCT_SIZE, 64)            \
  X(memra_op_env, 112, MEMRA_OP_ENV_STRUCT_SIZE, 112) /* 2.8 */                    \
  X(memra_op_example, 136, MEMRA_OP_EXAMPLE_STRUCT_SIZE, 132) /* 2.7 */            \
  X(memra_op_def, 80, MEMRA_OP_DEF_STRUCT_SIZE, 80) /* 2.7 */                      \
  X(memra_plugin_api, 64, MEMRA_PLUGIN_API_STRUCT_SIZE, 64) /* 2.7 */

#endif /* MEMRA_TEST_ABI_LAYOUT_TABLE_H */
