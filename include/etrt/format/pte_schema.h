// Slot numbers of the tables in schema/program.fbs (namespace executorch_flatbuffer, identifier "ET12").
// Slot k is the k-th field in declaration order of the ExecuTorch flatbuffer schema (program.fbs).
#pragma once

namespace etrt::pte {

namespace program { enum : int { version, execution_plan, constant_buffer, backend_delegate_data, segments, constant_segment, mutable_data_segments, named_data }; }
namespace plan { enum : int { name, container_meta_type, values, inputs, outputs, chains, operators, delegates, non_const_buffer_sizes, non_const_buffer_device }; }
namespace evalue { enum : int { val_type, val }; }
namespace tensor { enum : int { scalar_type, storage_offset, sizes, dim_order, requires_grad, data_buffer_idx, allocation_info, layout, shape_dynamism, extra_tensor_info }; }
namespace alloc { enum : int { memory_id, memory_offset_low, memory_offset_high }; }
namespace extra { enum : int { mutable_data_segments_idx, fully_qualified_name, location, device_type, device_index }; }
namespace chain { enum : int { inputs, outputs, instructions, stacktrace }; }
namespace instruction { enum : int { instr_args_type, instr_args }; }
namespace kernel_call { enum : int { op_index, args }; }
namespace delegate_call { enum : int { delegate_index, args }; }
namespace move_call { enum : int { move_from, move_to }; }
namespace jump_false_call { enum : int { cond_value_index, destination_instruction }; }
namespace free_call { enum : int { value_index }; }
namespace op { enum : int { name, overload }; }
namespace backend_delegate { enum : int { id, processed, compile_specs }; }
namespace data_ref { enum : int { location, index }; }
namespace compile_spec { enum : int { key, value }; }
namespace inline_data { enum : int { data }; }
namespace buffer { enum : int { storage }; }
namespace data_segment { enum : int { offset, size }; }
namespace subsegment { enum : int { segment_index, offsets }; }
namespace named_data { enum : int { key, segment_index }; }
namespace buffer_device { enum : int { buffer_idx, device_type, device_index }; }
namespace container_meta { enum : int { encoded_inp_str, encoded_out_str }; }
namespace scalar_value { enum : int { value }; }  // Int.int_val, Bool.bool_val, Double.double_val, String.string_val, *List.items

/// KernelTypes union tags (EValue.val_type).
enum class ValueTag : uint8_t { None = 0, Null = 1, Int = 2, Bool = 3, Double = 4, Tensor = 5, String = 6, IntList = 7, DoubleList = 8, BoolList = 9, TensorList = 10, OptionalTensorList = 11 };
/// InstructionArguments union tags.
enum class InstrTag : uint8_t { None = 0, KernelCall = 1, DelegateCall = 2, MoveCall = 3, JumpFalseCall = 4, FreeCall = 5 };

}  // namespace etrt::pte
