// placeholder: the CLI lands with the forward pass
int main() { return 0; }
