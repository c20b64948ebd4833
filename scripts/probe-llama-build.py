"""Exit 0 when the installed llama-cpp-python can evaluate the embedded model on this CPU.

A build made for another CPU, or one using instructions a sandbox traps (AMX tiles in some
virtual machines), loads fine and then dies with SIGILL at the first evaluation; the install
script runs this in a child process and rebuilds llama-cpp-python portably when it dies.
"""

from llama_cpp import Llama

from veriscale.models.embedded_files import default_gguf_path

llm = Llama(model_path=str(default_gguf_path()), n_ctx=64, n_batch=32, verbose=False)
llm.eval(llm.tokenize(b"Grade: A"))
print("llama.cpp evaluates on this CPU")
